"""A session's lifecycle links answering its suspension (server.md §1, §6): what a
``heso.gated`` session's decision and completion links do to the approval its
``suspended`` link opened.

The agent decides locally and never polls afterwards, so an approval its session has
answered no longer waits for votes. The service never records a human approval without a
verifiable signature:

- a decision link the mirror derived ``L1`` (signed by an approver key registered and
  active for the org) counts as that approver's vote, under the rules every vote follows
  (eligibility, nobody approves their own action, one vote a key): ``approved`` approves
  a single-approver approval, ``denied`` rejects;
- any other decision (an ``L0`` link: heso.gated's public placeholder key or a key the org
  never registered; an ``expired`` link; an ``L1`` link that cannot count) and a
  ``completed`` link on a still-open approval close it as ``decided_locally``: no vote,
  no human decision, the link's kind kept as ``local_decision``;
- an ``escalated`` link, and any link reaching an approval already settled, only adds a
  history row.

Every link is recorded in the approval's history with its hash, kind, derived level and
signer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.approvals.models import Approval, ApprovalStatus
from apps.approvals.selectors import approval_for_lifecycle_link
from apps.approvals.services.expiry import expire_locked
from apps.approvals.services.history import approval_event
from apps.approvals.services.voting import approval_vote_by_link
from apps.common import metrics
from apps.receipts.models import MirrorEntry, TrustLevel
from apps.receipts.verifier import verify_receipt
from apps.tenancy.models import Org

# The lifecycle kinds that answer a suspension (receipts.md §12, §13.3).
DECISION_KINDS = ("approved", "denied", "expired")
ANSWERING_KINDS = (*DECISION_KINDS, "escalated", "completed")


def approval_answer_link(
    *, org: Org, content: dict[str, Any], trust_level: str, decision_signer: str | None
) -> Approval | None:
    """Apply a mirrored lifecycle link to the approval it answers, if any (see the module
    docstring); runs inside the transaction that appended the link."""
    kind = content.get("kind")
    if kind not in ANSWERING_KINDS:
        return None
    approval = approval_for_lifecycle_link(org=org, content=content)
    if approval is None:
        return None
    now = timezone.now()
    detail = {
        "link": content["action_hash"],
        "link_kind": kind,
        "trust_level": trust_level,
        "signer": decision_signer,
    }
    with transaction.atomic():
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        expire_locked(locked, now)
        if locked.status != ApprovalStatus.PENDING:
            approval_event(locked, "lifecycle_link", now, **detail,
                           note=f"arrived after the approval was {locked.status}")  # fmt: skip
            return locked
        if kind == "escalated":
            approval_event(locked, "lifecycle_link", now, **detail,
                           note="the agent escalated it; it still waits for approvers")  # fmt: skip
            return locked
        why_not = "the link is not signed by an approver key registered and active for the org"
        if kind in ("approved", "denied") and trust_level == TrustLevel.L1 and decision_signer:
            why_not = (
                approval_vote_by_link(
                    locked, signer=decision_signer, decision=kind, link_hash=detail["link"], now=now
                )
                or ""
            )
            if not why_not:
                return locked  # counted: the vote's own history rows say what it did
        elif kind == "expired":
            why_not = "an expiry the agent recorded is not an approver's decision"
        elif kind == "completed":
            why_not = "the agent completed the action without a decision link reaching here"
        _close_locally(locked, kind=kind, detail=detail, why=why_not, now=now)
    return locked


def _close_locally(
    locked: Approval, *, kind: str, detail: dict[str, Any], why: str, now: datetime
) -> None:
    locked.status = ApprovalStatus.DECIDED_LOCALLY
    locked.local_decision = kind
    locked.resolved_at = now
    approval_event(locked, "decided_locally", now, **detail,
                   note=f"closed by the agent's own {kind} link, not counted as a human "
                   f"decision: {why}")  # fmt: skip
    locked.save(update_fields=["status", "local_decision", "resolved_at"])
    transaction.on_commit(lambda: metrics.approval_transition(ApprovalStatus.DECIDED_LOCALLY))


# How many of a session's links after its suspension an approval opened late looks at.
_LATE_LINKS_MAX = 16


def approval_answer_mirrored_links(*, org: Org, approval: Approval) -> None:
    """Apply the session's links already mirrored after ``approval``'s suspension (its
    client pushed them before opening it), in chain order, at the level the mirror stored
    for each; each stored receipt is verified again only to know its decision signer."""
    if not approval.session_id or approval.session_seq is None:
        return
    links = (
        MirrorEntry.objects.filter(
            org=org,
            session_id=approval.session_id,
            session_seq__gt=approval.session_seq,
            session_seq__lte=approval.session_seq + _LATE_LINKS_MAX,
            kind__in=ANSWERING_KINDS,
        )
        .order_by("session_seq")
        .values_list("receipt", "trust_level")
    )
    for text, trust_level in links:
        verdict = verify_receipt(text)
        if verdict.receipt is None:
            continue
        approval_answer_link(
            org=org, content=verdict.receipt.content, trust_level=trust_level,
            decision_signer=verdict.decision_signer,
        )  # fmt: skip
