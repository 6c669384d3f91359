"""The one write path into the mirror: ``receipt_append``.

Verification (the slow part, Ed25519 and BLAKE3) is done by the caller before this runs;
here everything happens inside one transaction that holds the org's ``MirrorHead`` row
lock, so ``seq`` is gapless, the chain is linear, the monthly quota is exact and a
receipt pushed concurrently twice is stored once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.receipts.errors import (
    ChainConstraint,
    QuotaExceeded,
    SupersedeRefused,
    SupersedeTargetNotFound,
)
from apps.receipts.mirror_chain import chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry, MirrorHead, TrustLevel
from apps.receipts.verifier import DecodedReceipt, link_hash
from apps.tenancy.models import ApiKey, Org

# Members the approval flow adds to a suspended L0 body (approvals.md §5-6, server.md §4).
_APPROVAL_BLOCKS = ("approver_decision", "multi_approval")
# Members the binding check ignores: the self hash and a relayed time anchor.
_UNBOUND = ("action_hash", "time_anchor")


@dataclass(frozen=True)
class AppendOutcome:
    entry: MirrorEntry
    appended: bool  # False: the action_hash was already mirrored (a duplicate push)


def receipt_append(
    *,
    org: Org,
    receipt: DecodedReceipt,
    trust_level: str,
    supersedes_action_hash: str | None = None,
    api_key: ApiKey | None = None,
) -> AppendOutcome:
    """Append a verified receipt to ``org``'s mirror, or return the existing entry."""
    digest = receipt_digest(receipt.stored_text)
    link = link_hash(receipt.content)
    now = timezone.now()
    with transaction.atomic():
        head = _lock_head(org)
        existing = MirrorEntry.objects.filter(org=org, action_hash=receipt.action_hash).first()
        if existing is not None:
            return AppendOutcome(entry=existing, appended=False)
        target = None
        if supersedes_action_hash:
            target = _supersede_target(org, receipt, trust_level, supersedes_action_hash)
        _check_session_continuity(org, receipt, target)
        _count_against_quota(org, head, now)
        seq = head.size + 1
        entry_chain_hash = chain_hash(
            prev_chain_hash=head.head,
            seq=seq,
            action_hash=receipt.action_hash,
            receipt_digest_hex=digest,
            supersedes_action_hash=supersedes_action_hash or "",
        )
        action = receipt.content["action"]
        entry = MirrorEntry.objects.create(
            org=org,
            seq=seq,
            action_hash=receipt.action_hash,
            receipt=receipt.stored_text,
            receipt_digest=digest,
            kind=receipt.kind,
            trust_level=trust_level,
            supersedes_action_hash=supersedes_action_hash or "",
            prev_chain_hash=head.head,
            chain_hash=entry_chain_hash,
            received_at=now,
            api_key=api_key,
            session_id=receipt.session_id or "",
            session_seq=receipt.seq if receipt.session_id else None,
            link_hash=link,
            operator_key=receipt.operator_public_key or "",
            agent_identity=receipt.content["agent_identity"],
            workflow=action["workflow"],
            verb=action["verb"],
            decision_path=receipt.content["policy"]["decision_path"],
            rule_id=receipt.content["policy"]["rule_id"],
        )
        head.size = seq
        head.head = entry_chain_hash
        head.save(update_fields=["size", "head", "month", "month_count"])
        if target is not None:
            MirrorEntry.objects.filter(pk=target.pk).update(superseded_by=receipt.action_hash)
    return AppendOutcome(entry=entry, appended=True)


def _lock_head(org: Org) -> MirrorHead:
    head = MirrorHead.objects.select_for_update().filter(org=org).first()
    if head is None:
        # First append of this org: create the row without racing a concurrent first append.
        MirrorHead.objects.bulk_create([MirrorHead(org=org)], ignore_conflicts=True)
        head = MirrorHead.objects.select_for_update().get(org=org)
    return head


def _month_of(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m")


def _count_against_quota(org: Org, head: MirrorHead, now: datetime) -> None:
    month = _month_of(now)
    if head.month != month:
        head.month, head.month_count = month, 0
    cap = org.effective_monthly_receipt_cap
    if head.month_count >= cap:
        raise QuotaExceeded(f"monthly mirror soft-cap of {cap} receipts reached for {month}")
    head.month_count += 1


def _supersede_target(
    org: Org, receipt: DecodedReceipt, trust_level: str, target_hash: str
) -> MirrorEntry:
    """The entry ``receipt`` may supersede, or a refusal (server.md §4)."""
    target = MirrorEntry.objects.filter(org=org, action_hash=target_hash).first()
    if target is None:
        raise SupersedeTargetNotFound(f"no mirrored receipt with action_hash {target_hash}")
    if target.superseded_by:
        raise SupersedeRefused(f"{target_hash} is already superseded by {target.superseded_by}")
    if target.trust_level != TrustLevel.L0:
        raise SupersedeRefused(
            f"{target_hash} is {target.trust_level}; only an L0 entry can be superseded"
        )
    if trust_level != TrustLevel.L1:
        raise SupersedeRefused(f"the superseding receipt is {trust_level}; it must be L1")
    if _bound_content(receipt.content, promoted=True) != _bound_content(
        json.loads(target.receipt)["content"], promoted=False
    ):
        raise SupersedeRefused(
            f"the receipt is not the approved form of {target_hash}: its content, without "
            "the approval block and at L0, differs from the superseded content"
        )
    return target


def _bound_content(content: dict[str, Any], *, promoted: bool) -> dict[str, Any]:
    bound = {key: value for key, value in content.items() if key not in _UNBOUND}
    if promoted:
        for block in _APPROVAL_BLOCKS:
            bound.pop(block, None)
        bound["trust_level"] = TrustLevel.L0.value
    return bound


def _check_session_continuity(
    org: Org, receipt: DecodedReceipt, target: MirrorEntry | None
) -> None:
    """server.md §5: no fork at a mirrored (session_id, seq); links match a mirrored parent."""
    if not receipt.session_id or receipt.seq is None:
        return
    session = MirrorEntry.objects.filter(org=org, session_id=receipt.session_id)
    same_position = session.filter(session_seq=receipt.seq).exclude(action_hash=receipt.action_hash)
    if target is not None:
        # The approved form of a suspended receipt keeps its chain block.
        same_position = same_position.exclude(pk=target.pk)
    if same_position.exists():
        raise ChainConstraint(
            f"chain constraint: session {receipt.session_id!r} already has a different "
            f"receipt at seq {receipt.seq} (fork)"
        )
    if receipt.seq == 0:
        return
    parents = list(session.filter(session_seq=receipt.seq - 1).values_list("link_hash", flat=True))
    if parents and receipt.prev_receipt_hash not in parents:
        raise ChainConstraint(
            f"chain constraint: prev_receipt_hash {receipt.prev_receipt_hash} does not link to "
            f"the mirrored receipt at seq {receipt.seq - 1} of session {receipt.session_id!r}"
        )
