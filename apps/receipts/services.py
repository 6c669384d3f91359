"""The one write path into the mirror: ``receipt_append`` (and ``receipt_append_batch``,
the same append for several receipts under one lock).

Verification (the slow part, Ed25519 and BLAKE3) is done by the caller before this runs;
here everything happens inside one transaction that holds the org's ``MirrorHead`` row
lock, so ``seq`` is gapless, the chain is linear, the monthly quota is exact and a
receipt pushed concurrently twice is stored once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.common import metrics, outbound
from apps.common.timestamps import utc_text
from apps.receipts.append_sql import (
    AppendStatements,
    LockedHead,
    RelatedEntry,
    append_transaction,
)
from apps.receipts.columns import indexed_text
from apps.receipts.errors import (
    ChainConstraint,
    QuotaExceeded,
    SupersedeRefused,
    SupersedeTargetNotFound,
)
from apps.receipts.mirror_chain import chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry, RefusalCount, TrustLevel
from apps.receipts.selectors import RETIRED_BODY, is_retired
from apps.receipts.verifier import DecodedReceipt, canonicalize, link_hash, parse_json
from apps.receipts.verifier.schema import decode_envelope
from apps.tenancy.models import ApiKey, Org

# Members the approval flow adds to a suspended L0 body (approvals.md §5-6, server.md §4).
_APPROVAL_BLOCKS = ("approver_decision", "multi_approval")
# Members the binding check ignores: the self hash and a relayed time anchor.
_UNBOUND = ("action_hash", "time_anchor")


# What _plan_append refuses with, always before the append writes anything.
_REFUSALS = (ChainConstraint, QuotaExceeded, SupersedeRefused, SupersedeTargetNotFound)


@dataclass(frozen=True)
class AppendOutcome:
    seq: int
    action_hash: str
    appended: bool  # False: the action_hash was already mirrored (a duplicate push)
    # The level stored for the entry (server.md §1), and the receipt's claim where it differs.
    trust_level: str = "L0"
    claimed_trust_level: str = ""


def receipt_append(
    *,
    org: Org,
    receipt: DecodedReceipt,
    trust_level: str,
    supersedes_action_hash: str | None = None,
    api_key: ApiKey | None = None,
) -> AppendOutcome:
    """Append a verified receipt to ``org``'s mirror, or report the existing entry."""
    append = partial(
        _append_locked,
        org=org,
        receipt=receipt,
        digest=receipt_digest(receipt.stored_text),
        trust_level=trust_level,
        supersedes_action_hash=supersedes_action_hash,
        api_key=api_key,
        now=timezone.now(),
    )
    # A supersede also marks the entry it replaces through the ORM.
    outcome = append_transaction(append, orm=bool(supersedes_action_hash), refusals=_REFUSALS)
    if outcome.appended:
        transaction.on_commit(lambda: metrics.receipts_appended(settings.API_PROFILE))
    return outcome


@dataclass(frozen=True)
class BatchItem:
    """One verified receipt of a batch, with the trust level its verification derived."""

    receipt: DecodedReceipt
    trust_level: str


BatchResult = AppendOutcome | ChainConstraint | QuotaExceeded


def receipt_append_batch(
    *, org: Org, items: Sequence[BatchItem], api_key: ApiKey | None = None
) -> list[BatchResult]:
    """Append verified receipts in order under ONE head lock: one result per item.

    Each item is decided exactly as a single append is (duplicate, session continuity,
    quota) against what the org already holds and what the batch appended before it, so an
    item refused by the chain or the quota does not stop the others; its refusal is
    returned in its place. The entries appended by one batch are contiguous in the org's
    chain, in the order of ``items``. A receipt given twice is a duplicate the second time.
    The whole batch costs one lock-and-read round trip (each receipt's related-entries read
    pipelined behind the lock) and one multi-row insert that also moves the head once: the
    refusals are decided before anything is written.
    """
    if not items:
        return []
    results = append_transaction(partial(_append_batch, org=org, items=items, api_key=api_key))
    count = sum(isinstance(result, AppendOutcome) and result.appended for result in results)
    if count:
        transaction.on_commit(lambda: metrics.receipts_appended(settings.API_PROFILE, count))
    return results


def _append_batch(
    sql: AppendStatements, *, org: Org, items: Sequence[BatchItem], api_key: ApiKey | None
) -> list[BatchResult]:
    """The batch inside its append transaction (see :func:`receipt_append_batch`)."""
    now = timezone.now()
    results: list[BatchResult] = []
    keys = [tuple(_related_keys(item.receipt).values()) for item in items]
    head, related = sql.lock_and_read_many(org_id=org.pk, receipts=keys)
    if head is None:
        sql.create_head(org_id=org.pk)
        head, related = sql.lock_and_read_many(org_id=org.pk, receipts=keys)
        assert head is not None
    known = _RelatedIndex(related)
    context = _AppendContext.of(org, api_key, now)
    entries: list[dict[str, Any]] = []
    texts: list[str] = []
    counted: list[int] = []  # month counts that reach a quota threshold
    for item in items:
        receipt = item.receipt
        try:
            planned = _plan_append(
                org=org, context=context, head=head, related=known.for_receipt(receipt),
                receipt=receipt, digest=receipt_digest(receipt.stored_text),
                trust_level=item.trust_level, supersedes_action_hash=None,
            )  # fmt: skip
        except (ChainConstraint, QuotaExceeded) as refusal:
            results.append(refusal)
            continue
        if isinstance(planned, AppendOutcome):
            results.append(planned)
            continue
        entry, head = planned
        if _reaches_a_threshold(sql, context, head):
            counted.append(head.month_count)
        texts.append(entry.pop("receipt"))  # travels apart (see insert_many_and_advance)
        entries.append(entry)
        known.add(entry)
        results.append(_appended(entry))
    if entries:
        sql.insert_many_and_advance(entries=entries, receipts=texts, head=head, org_id=org.pk)
    for count in counted:
        _quota_counted(context, count)
    return results


def _reaches_a_threshold(sql: AppendStatements, context: _AppendContext, head: LockedHead) -> bool:
    """Whether the append that left ``head`` reaches a quota threshold, whose event is
    recorded after the append's statements in its transaction, which then cannot be a
    pipeline (``sql.outside_pipeline``: it carries the append's own statements only)."""
    if not outbound.quota_thresholds_reached(count=head.month_count, cap=context.cap):
        return False
    sql.outside_pipeline()
    return True


def _quota_counted(context: _AppendContext, count: int) -> None:
    outbound.quota_counted(org_id=context.org_id, month=context.month, count=count, cap=context.cap)


class _RelatedIndex:
    """The entries a batch's receipts relate to, by action hash and by session position,
    including the ones the batch itself appends (not yet in the database)."""

    def __init__(self, entries: list[RelatedEntry]) -> None:
        self._by_hash: dict[str, RelatedEntry] = {}
        self._by_position: dict[tuple[str, int], list[RelatedEntry]] = {}
        for entry in entries:
            self._index(entry)

    def _index(self, entry: RelatedEntry) -> None:
        self._by_hash.setdefault(entry.action_hash, entry)
        if entry.session_id and entry.session_seq is not None:
            self._by_position.setdefault((entry.session_id, entry.session_seq), []).append(entry)

    def add(self, entry: dict[str, Any]) -> None:
        appended = RelatedEntry(
            entry_id=-entry["seq"], seq=entry["seq"], session_seq=entry["session_seq"],
            action_hash=entry["action_hash"], link_hash=entry["link_hash"],
            trust_level=entry["trust_level"], claimed_trust_level=entry["claimed_trust_level"],
            session_id=entry["session_id"],
        )  # fmt: skip
        self._index(appended)

    def for_receipt(self, receipt: DecodedReceipt) -> list[RelatedEntry]:
        found = []
        if receipt.action_hash in self._by_hash:
            found.append(self._by_hash[receipt.action_hash])
        if receipt.session_id and receipt.seq is not None:
            session_id = indexed_text(receipt.session_id)
            for seq in (receipt.seq, receipt.seq - 1):
                found += self._by_position.get((session_id, seq), [])
        return found


def _related_keys(receipt: DecodedReceipt) -> dict[str, Any]:
    """What finds the entries that matter to ``receipt``: its action_hash, and its session
    position when it carries a chain block."""
    has_block = bool(receipt.session_id) and receipt.seq is not None
    return {
        "action_hash": receipt.action_hash,
        "session_id": indexed_text(receipt.session_id or "") if has_block else None,
        "session_seq": receipt.seq if has_block else None,
    }


def _append_locked(
    sql: AppendStatements,
    *,
    org: Org,
    receipt: DecodedReceipt,
    digest: str,
    trust_level: str,
    supersedes_action_hash: str | None,
    api_key: ApiKey | None,
    now: datetime,
) -> AppendOutcome:
    """The append itself, inside the append transaction: lock the org's head (creating it
    for the org's first append), decide, write. Within a batch the lock is already held
    and the head read back is the one the previous item left."""
    keys = _related_keys(receipt)
    head, related = sql.lock_and_read(org_id=org.pk, **keys)
    if head is None:
        sql.create_head(org_id=org.pk)
        head, related = sql.lock_and_read(org_id=org.pk, **keys)
        assert head is not None
    context = _AppendContext.of(org, api_key, now)
    planned = _plan_append(
        org=org, context=context, head=head, related=related,
        receipt=receipt, digest=digest, trust_level=trust_level,
        supersedes_action_hash=supersedes_action_hash,
    )  # fmt: skip
    if isinstance(planned, AppendOutcome):
        return planned
    entry, advanced = planned
    reaches = _reaches_a_threshold(sql, context, advanced)
    sql.insert_and_advance(entry=entry, head=advanced, org_id=org.pk)
    if supersedes_action_hash:
        MirrorEntry.objects.filter(org=org, action_hash=supersedes_action_hash).update(
            superseded_by=receipt.action_hash
        )
    if reaches:
        _quota_counted(context, advanced.month_count)
    return _appended(entry)


@dataclass(frozen=True)
class _AppendContext:
    """What every append of one transaction shares, read once (a batch plans up to a
    hundred appends under the lock, each of which read these anew before)."""

    org_id: int
    cap: int
    month: str
    now: datetime
    api_key_id: int | None

    @classmethod
    def of(cls, org: Org, api_key: ApiKey | None, now: datetime) -> _AppendContext:
        return cls(
            org_id=org.pk,
            cap=org.effective_monthly_receipt_cap,
            month=_month_of(now),
            now=now,
            api_key_id=api_key.pk if api_key else None,
        )


def _plan_append(
    *,
    org: Org,
    context: _AppendContext,
    head: LockedHead,
    related: list[RelatedEntry],
    receipt: DecodedReceipt,
    digest: str,
    trust_level: str,
    supersedes_action_hash: str | None,
) -> AppendOutcome | tuple[dict[str, Any], LockedHead]:
    """Decide an append against ``head`` and the ``related`` entries seen with it: the
    existing entry's outcome for a duplicate, a refusal (raised), or the entry to insert
    and the head after it."""
    action_hash = receipt.action_hash
    existing = next((e for e in related if e.action_hash == action_hash), None)
    if existing is not None:
        return AppendOutcome(
            seq=existing.seq,
            action_hash=existing.action_hash,
            appended=False,
            trust_level=existing.trust_level,
            claimed_trust_level=existing.claimed_trust_level,
        )
    target = None
    if supersedes_action_hash:
        target = _supersede_target(org, receipt, trust_level, supersedes_action_hash)
    content = receipt.content
    session_id = receipt.session_id
    session_seq = receipt.seq
    if session_id and session_seq is not None:
        _check_session_continuity(receipt, related, target)
    month_count = _count_against_quota(context, head)
    seq = head.size + 1
    entry_chain_hash = chain_hash(
        prev_chain_hash=head.head,
        seq=seq,
        action_hash=action_hash,
        receipt_digest_hex=digest,
        supersedes_action_hash=supersedes_action_hash or "",
    )
    claimed = content["trust_level"] if content["trust_level"] != trust_level else ""
    action = content["action"]
    policy = content["policy"]
    entry = {
        "org_id": context.org_id,
        "seq": seq,
        "action_hash": action_hash,
        "receipt": receipt.stored_text,
        "receipt_digest": digest,
        "kind": receipt.kind,
        "trust_level": trust_level,
        "claimed_trust_level": claimed,
        "supersedes_action_hash": supersedes_action_hash or "",
        "prev_chain_hash": head.head,
        "chain_hash": entry_chain_hash,
        "received_at": context.now,
        "api_key_id": context.api_key_id,
        "session_id": indexed_text(session_id or ""),
        "session_seq": session_seq if session_id else None,
        "link_hash": link_hash(content),
        "operator_key": receipt.operator_public_key or "",
        "agent_identity": indexed_text(content["agent_identity"]),
        "workflow": indexed_text(action["workflow"]),
        "verb": action["verb"],
        "decision_path": policy["decision_path"],
        "rule_id": indexed_text(policy["rule_id"]),
        "tool_name": indexed_text(action["tool_name"]),
    }  # fmt: skip
    advanced = LockedHead(
        size=seq, head=entry_chain_hash, month=context.month, month_count=month_count
    )
    return entry, advanced


def _appended(entry: dict[str, Any]) -> AppendOutcome:
    return AppendOutcome(
        seq=entry["seq"],
        action_hash=entry["action_hash"],
        appended=True,
        trust_level=entry["trust_level"],
        claimed_trust_level=entry["claimed_trust_level"],
    )


def _month_of(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m")


def _count_against_quota(context: _AppendContext, head: LockedHead) -> int:
    """The month's count after this append, or QuotaExceeded. Exact: under the lock."""
    count = head.month_count if head.month == context.month else 0
    cap = context.cap
    if count >= cap:
        raise QuotaExceeded(
            f"monthly mirror soft-cap of {cap} receipts reached for {context.month}"
        )
    return count + 1


def _supersede_target(
    org: Org, receipt: DecodedReceipt, trust_level: str, target_hash: str
) -> MirrorEntry:
    """The entry ``receipt`` may supersede, or a refusal (server.md §4)."""
    target = MirrorEntry.objects.filter(org=org, action_hash=target_hash).first()
    if target is None:
        raise SupersedeTargetNotFound(f"no mirrored receipt with action_hash {target_hash}")
    if is_retired(target):
        raise SupersedeRefused(
            f"{target_hash} is past the org's retention: its body is archived and retired "
            "from the mirror, so the approved form cannot be bound to it"
        )
    if target.superseded_by:
        raise SupersedeRefused(f"{target_hash} is already superseded by {target.superseded_by}")
    if target.trust_level != TrustLevel.L0:
        raise SupersedeRefused(
            f"{target_hash} is {target.trust_level}; only an L0 entry can be superseded"
        )
    if trust_level != TrustLevel.L1:
        raise SupersedeRefused(f"the superseding receipt is {trust_level}; it must be L1")
    if canonicalize(_bound_content(receipt.content, promoted=True)) != canonicalize(
        _bound_content(_stored_content(target.receipt), promoted=False)
    ):
        raise SupersedeRefused(
            f"the receipt is not the approved form of {target_hash}: its content, without "
            "the approval block and at L0, differs from the superseded content"
        )
    return target


def _stored_content(stored_text: str) -> dict[str, Any]:
    """A stored receipt's content decoded exactly as a pushed one is (numbers as the
    verifier holds them), so the binding check compares like with like."""
    envelope, _ = decode_envelope(parse_json(stored_text))
    content: dict[str, Any] = envelope["content"]
    return content


def _bound_content(content: dict[str, Any], *, promoted: bool) -> dict[str, Any]:
    bound = {key: value for key, value in content.items() if key not in _UNBOUND}
    if promoted:
        for block in _APPROVAL_BLOCKS:
            bound.pop(block, None)
        bound["trust_level"] = TrustLevel.L0.value
    return bound


def _check_session_continuity(
    receipt: DecodedReceipt, related: list[RelatedEntry], target: MirrorEntry | None
) -> None:
    """server.md §5: no fork at a mirrored (session_id, seq); links match a mirrored parent."""
    assert receipt.seq is not None
    for entry in related:
        if (
            entry.session_seq == receipt.seq
            and entry.action_hash != receipt.action_hash
            # The approved form of a suspended receipt keeps its chain block.
            and (target is None or entry.entry_id != target.pk)
        ):
            raise ChainConstraint(
                f"chain constraint: session {receipt.session_id!r} already has a different "
                f"receipt at seq {receipt.seq} (fork)"
            )
    if receipt.seq == 0:
        return
    parents = [entry.link_hash for entry in related if entry.session_seq == receipt.seq - 1]
    if parents and receipt.prev_receipt_hash not in parents:
        raise ChainConstraint(
            f"chain constraint: prev_receipt_hash {receipt.prev_receipt_hash} does not link to "
            f"the mirrored receipt at seq {receipt.seq - 1} of session {receipt.session_id!r}"
        )


def _count_refusals(kinds: int) -> str:
    """One upsert adding to the day's count of ``kinds`` verdict kinds."""
    table = RefusalCount._meta.db_table
    rows = ", ".join(["(%s, %s, %s, %s)"] * kinds)
    return (
        f"INSERT INTO {table} (org_id, day, kind, count) VALUES {rows} "  # noqa: S608
        f"ON CONFLICT (org_id, day, kind) DO UPDATE SET count = {table}.count + EXCLUDED.count"
    )


def _refused_payload(
    kind: str, action_hash: str | None, refused_at: str
) -> Callable[[], dict[str, Any]]:
    return lambda: {"kind": kind, "action_hash": action_hash, "refused_at": refused_at}


def refusals_record(*, org: Org, refusals: Sequence[tuple[str, str]]) -> None:
    """Count refused receipts, each a ``(verdict kind, action hash or "")``, for today
    (UTC): one upsert whatever their number (a batch of bad receipts costs one round
    trip, not one a receipt), exact under concurrency. Emits ``receipt.refused`` for each
    (the verdict kind and, where the receipt decoded that far, its action hash: nothing
    else of the receipt)."""
    if not refusals:
        return
    now = timezone.now()
    counts = Counter(kind[:64] for kind, _ in refusals)
    params: list[Any] = []
    for kind, count in sorted(counts.items()):  # one row order: concurrent batches never
        params += [org.pk, now.date(), kind, count]  # wait on each other's rows crosswise
    # One statement needs no transaction of its own; with events to record, the counts
    # and the events commit together.
    together = transaction.atomic() if outbound.wanted(org.pk, "receipt.refused") else nullcontext()
    with together, connection.cursor() as cursor:
        cursor.execute(_count_refusals(len(counts)), params)
        refused_at = utc_text(now)
        for kind, action_hash in refusals:
            outbound.emit(
                org_id=org.pk,
                event_type="receipt.refused",
                payload=_refused_payload(kind[:64], action_hash or None, refused_at),
            )
    for kind, _ in refusals:
        metrics.receipts_refused(kind)


def mirror_bodies_retire(
    *, org: Org, first_seq: int, last_seq: int, batch: int | None = None
) -> int:
    """Empty the stored text of ``org``'s entries ``first_seq`` … ``last_seq`` (the body is
    retired; seq, hashes, digests, links and trust level stay, so the chain and the proofs
    still verify); the number of entries retired now. Call it only for a range whose
    archive was written and verified (``apps.audit.retention``; a benchmark may call it
    alone).

    Batched: one short statement of at most ``batch`` entries (``RETENTION_RETIRE_BATCH``)
    at a time, each its own transaction, on the (org, seq) index. The append never waits on
    these rows (it reads them only for a duplicate or a session neighbour, and an UPDATE
    blocks no reader), and the space of each batch's old versions is reusable once VACUUM
    has passed. Idempotent: an entry already retired is skipped, so a retry after a crash
    finishes the range."""
    size = batch or settings.RETENTION_RETIRE_BATCH
    retired = 0
    for start in range(first_seq, last_seq + 1, size):
        end = min(start + size - 1, last_seq)
        with transaction.atomic():
            retired += (
                MirrorEntry.objects.filter(org=org, seq__gte=start, seq__lte=end)
                .exclude(receipt=RETIRED_BODY)
                .update(receipt=RETIRED_BODY)
            )
    return retired
