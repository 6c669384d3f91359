"""Reads of the mirror; every read takes the org explicitly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.receipts.verifier import Verdict, verify_receipt
from apps.tenancy.models import Org


@dataclass(frozen=True)
class ChainHead:
    """Where an org's chain stands: its size and head hash, and the month's append count
    ("YYYY-MM", UTC) the quota reads."""

    size: int
    head: str
    month: str
    month_count: int


def mirror_head_get(*, org: Org) -> ChainHead:
    """The org's chain head; an org that never mirrored has the empty chain."""
    row = MirrorHead.objects.filter(org=org).values_list("size", "head", "month", "month_count")
    size, head, month, month_count = row.first() or (0, EMPTY_CHAIN_HEAD, "", 0)
    return ChainHead(size=size, head=head, month=month, month_count=month_count)


# A retired entry's stored text (apps.audit.retention): its body lives in the org's archive
# of that month; what the chain and the proofs need stays in the row.
RETIRED_BODY = ""


def is_retired(entry: MirrorEntry) -> bool:
    """Whether the entry's body has been archived and retired from the mirror (a stored
    receipt is never empty otherwise: it is the JCS text of a JSON object)."""
    return entry.receipt == RETIRED_BODY


# For a check against the archive: the archived body of a retired entry's ``seq``, or None
# when no archive answers for it.
ArchivedBody = Callable[[int], "str | None"]


@dataclass(frozen=True)
class ChainCheck:
    size: int
    head: str
    first_bad_seq: int | None = None
    problem: str | None = None
    retired: int = 0  # entries whose body is archived (checked by their digests)
    checked_against_archive: int = 0  # of those, re-verified from the archived body

    @property
    def ok(self) -> bool:
        return self.first_bad_seq is None


def mirror_chain_check(
    *,
    org: Org,
    progress: Callable[[int, int], None] | None = None,
    archived_body: ArchivedBody | None = None,
) -> ChainCheck:
    """Recompute ``org``'s whole chain from the stored receipts and re-verify each one.

    A retired entry (its body archived) is checked by its stored digest: its chain hash
    recomputes from it and links to its neighbours. With ``archived_body`` it is checked
    against the archive too: the archived body has that digest and verifies as a receipt
    would have. Stops at the first entry whose stored receipt, digest, verdict, position or
    chain hash does not hold, and names its ``seq``.
    """
    stored = mirror_head_get(org=org)
    total = stored.size
    running = EMPTY_CHAIN_HEAD
    expected_seq = 0
    retired = against_archive = 0
    entries = MirrorEntry.objects.filter(org=org).order_by("seq")
    for entry in entries.iterator(chunk_size=500):
        expected_seq += 1
        text: str | None = entry.receipt
        if is_retired(entry):
            retired += 1
            text = archived_body(entry.seq) if archived_body is not None else None
            if archived_body is not None and text is None:
                problem: str | None = "retired, and no archive holds its body"
                return ChainCheck(size=total, head=running, first_bad_seq=entry.seq,
                                  problem=problem)  # fmt: skip
            against_archive += text is not None
        problem = _entry_problem(entry, expected_seq, running, text)
        if problem is not None:
            return ChainCheck(size=total, head=running, first_bad_seq=entry.seq, problem=problem)
        running = entry.chain_hash
        if progress is not None:
            progress(expected_seq, total)
    if (stored.size, stored.head) != (expected_seq, running):
        return ChainCheck(
            size=total,
            head=running,
            first_bad_seq=expected_seq + 1,
            problem=f"chain head records {stored.size} entries ending {stored.head}, "
            f"the entries end at {expected_seq} with {running}",
        )
    return ChainCheck(
        size=expected_seq, head=running, retired=retired, checked_against_archive=against_archive
    )


def stored_level_holds(verdict: Verdict, stored: str) -> bool:
    """Whether an entry's stored trust level agrees with re-verification: the same level, or
    a decision-signed lifecycle link stored ``L1`` because its signer was an approver key of
    the org when it was pushed (server.md §1; offline, every lifecycle kind derives L0)."""
    return verdict.trust_level == stored or (verdict.decision_signer is not None and stored == "L1")


def _entry_problem(
    entry: MirrorEntry, expected_seq: int, prev: str, text: str | None
) -> str | None:
    """What is wrong with ``entry`` at ``expected_seq`` after ``prev``; ``text`` is its
    body (the stored one, or a retired entry's archived one), None for a retired entry
    checked by its stored digest alone."""
    if entry.seq != expected_seq:
        return f"seq {entry.seq} found where {expected_seq} was expected (gap or reorder)"
    if entry.prev_chain_hash != prev:
        return "prev_chain_hash does not equal the previous entry's chain_hash"
    if text is None:
        return _link_problem(entry, prev, entry.receipt_digest)
    where = "archived" if is_retired(entry) else "stored"
    digest = receipt_digest(text)
    if digest != entry.receipt_digest:
        return f"{where} receipt does not match its receipt_digest"
    verdict = verify_receipt(text)
    if not verdict.is_valid or verdict.receipt is None:
        return f"{where} receipt no longer verifies: {verdict.kind}: {verdict.detail}"
    if verdict.receipt.action_hash != entry.action_hash:
        return f"{where} receipt's action_hash differs from the entry's"
    if not stored_level_holds(verdict, entry.trust_level):
        return f"stored trust level {entry.trust_level} differs from derived {verdict.trust_level}"
    return _link_problem(entry, prev, digest)


def _link_problem(entry: MirrorEntry, prev: str, digest: str) -> str | None:
    recomputed = chain_hash(
        prev_chain_hash=prev,
        seq=entry.seq,
        action_hash=entry.action_hash,
        receipt_digest_hex=digest,
        supersedes_action_hash=entry.supersedes_action_hash,
    )
    if recomputed != entry.chain_hash:
        return "chain_hash does not match its recomputation"
    return None
