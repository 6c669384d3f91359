"""Reads of approvals. Nothing here writes: an approval past its expiry is shown as its
``on_timeout`` outcome (:func:`approval_as_of`) while the stored row waits for the sweep."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet, prefetch_related_objects
from django.utils import timezone

from apps.approvals.content import action_spec, signed_approval_block
from apps.approvals.errors import AmbiguousTicket, ApprovalNotFound
from apps.approvals.models import (
    COUNTED_VOTE,
    COUNTED_VOTES_ATTR,
    Approval,
    ApprovalEscalation,
    ApprovalStatus,
    ApprovalVote,
    ApproverKey,
)
from apps.common.stored_json import stored_value
from apps.receipts.columns import indexed_text
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import link_hash
from apps.tenancy.models import Org


def approval_as_of(approval: Approval, now: datetime | None = None) -> Approval:
    """``approval`` as it stands at ``now``: past its expiry, with the outcome its signed
    ``on_timeout`` gives (a copy; the stored row is the sweep's to change)."""
    outcome = approval.expiry_outcome(now or timezone.now())
    if outcome is None:
        return approval
    shown = copy.copy(approval)
    for name, value in outcome.items():
        setattr(shown, name, value)
    return shown


def approval_get_by_id(*, org: Org, approval_id: str) -> Approval:
    """The org's approval with ``approval_id``, as it stands now; another org's is 404."""
    approval = Approval.objects.filter(org=org, approval_id=approval_id).first()
    if approval is None:
        raise ApprovalNotFound(f"no approval {approval_id!r} for this team")
    return approval_as_of(approval)


def approval_get(*, org: Org, action_hash: str) -> Approval:
    """The approval ``action_hash`` names (the content hash or the suspend ticket)."""
    approval = approval_resolve(org=org, ref=action_hash)
    if approval is None:
        raise ApprovalNotFound("no approval for this action_hash")
    return approval_as_of(approval)


def eligible_approvers(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """Who may vote now: the frozen roster's keys still active once the first vote froze
    it; before that, the org's active keys narrowed to the suspension's signed
    ``approver_pubkeys`` when that list is non-empty (an empty list narrows nothing)."""
    # Confirmed and not revoked: a key a member enrolled counts once it is confirmed.
    active = set(
        ApproverKey.objects.active()
        .filter(org_id=approval.org_id)
        .values_list("public_key", flat=True)
    )
    if approval.roster_frozen_at is not None:
        return sorted(active & set(approval.roster))
    if content is None and approval.suspended_content:
        content = stored_value(approval.suspended_content)
    listed = signed_approval_block(content).get("approver_pubkeys")
    if isinstance(listed, list) and listed:
        active &= {key for key in listed if isinstance(key, str)}
    return sorted(active)


def approval_roster(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """The roster a quorum leg signs over: frozen, or the one the next vote would freeze."""
    if approval.roster_frozen_at is not None:
        return list(approval.roster)
    return eligible_approvers(approval, content=content)


def approval_resolve(*, org: Org, ref: str) -> Approval | None:
    """The org's approval a request's hash names: by the suspended content's action_hash,
    else by its suspend ticket. A ticket shared by two suspended contents is refused."""
    direct = Approval.objects.filter(org=org, action_hash=ref).first()
    if direct is not None:
        return direct
    by_ticket = list(Approval.objects.filter(org=org, ticket_hash=ref).order_by("pk")[:3])
    if len(by_ticket) > 1:
        hashes = ", ".join(approval.action_hash for approval in by_ticket)
        raise AmbiguousTicket(
            f"the suspend ticket {ref} names more than one suspended receipt of this org "
            f"({hashes}): address the approval by the receipt's content.action_hash"
        )
    return by_ticket[0] if by_ticket else None


def mirrored_content(*, org: Org, action_hash: str) -> dict[str, Any] | None:
    """The content of the mirrored receipt with ``action_hash``, if any."""
    text = (
        MirrorEntry.objects.filter(org=org, action_hash=action_hash)
        .values_list("receipt", flat=True)
        .first()
    )
    if text is None:
        return None
    content: dict[str, Any] = stored_value(text)["content"]
    return content


def counted_votes(approval: Approval) -> QuerySet[ApprovalVote]:
    """The votes that count (:meth:`Approval.counted_votes`: set-aside votes stay in the
    history, uncounted)."""
    return approval.counted_votes()


def approval_with_votes(approval: Approval) -> Approval:
    """``approval`` with its counted votes read once, for a record that shows them and
    derives its outcome and deciding approver from them (:meth:`Approval.outcome_at`)."""
    prefetch_related_objects(
        [approval],
        Prefetch(
            "votes", queryset=ApprovalVote.objects.filter(COUNTED_VOTE), to_attr=COUNTED_VOTES_ATTR
        ),
    )
    return approval


# The outcomes team-path reports (an approval the agent closed locally reports rejected).
TEAMPATH_OUTCOMES = [
    ApprovalStatus.PENDING.value,
    ApprovalStatus.APPROVED.value,
    ApprovalStatus.REJECTED.value,
    ApprovalStatus.EXPIRED.value,
]


# How far back along a session's chain a lifecycle link may answer a suspension (the
# escalations between a suspension and its decision, then the decision before a completion).
_LINK_WALK_MAX = 16


def approval_for_lifecycle_link(*, org: Org, content: dict[str, Any]) -> Approval | None:
    """The approval a session's lifecycle link (a decision, an escalation, a completion)
    answers: the nearest earlier suspension of the same action in the same session whose
    link hash the link's chain leads back to (receipts.md §13), through the mirrored links
    between them. None when the link answers no approval of ``org``."""
    session_id, seq = content.get("session_id"), content.get("seq")
    if not isinstance(session_id, str) or not session_id or not isinstance(seq, int):
        return None
    stored_session = indexed_text(session_id)
    spec = action_spec(content)
    candidates = Approval.objects.filter(
        org=org,
        session_id=stored_session,
        session_seq__lt=seq,
        session_seq__gte=seq - _LINK_WALK_MAX,
    ).order_by("-session_seq")
    for approval in candidates:
        suspended: dict[str, Any] = stored_value(approval.suspended_content)
        if action_spec(suspended) != spec:
            continue
        if _chain_reaches(org, stored_session, content, approval.session_seq, link_hash(suspended)):
            return approval
    return None


def _chain_reaches(
    org: Org, session_id: str, content: dict[str, Any], target_seq: int | None, target: str
) -> bool:
    """Whether ``content``'s chain leads back to the link ``target`` at ``target_seq``,
    through the org's mirrored links of the session."""
    seq, previous = content["seq"], content.get("prev_receipt_hash")
    while target_seq is not None and seq - 1 > target_seq:
        text = (
            MirrorEntry.objects.filter(
                org=org, session_id=session_id, session_seq=seq - 1, link_hash=previous
            )
            .values_list("receipt", flat=True)
            .first()
        )
        if text is None:
            return False
        seq, previous = seq - 1, stored_value(text)["content"].get("prev_receipt_hash")
    return seq - 1 == target_seq and previous == target


def approver_names(org_id: int, public_keys: Iterable[str] | None = None) -> dict[str, str]:
    """Public key -> the person and device it stands for, as every page names an approver:
    "Alice Doe (work laptop)" for a key a member holds, "label (key id)" for one registered
    for a script, the key id alone without a label. Revoked keys too (history names them)."""
    keys = ApproverKey.objects.filter(org_id=org_id).select_related("member")
    if public_keys is not None:
        keys = keys.filter(public_key__in=list(public_keys))
    return {key.public_key: approver_key_name(key) for key in keys}


def approver_key_name(key: ApproverKey) -> str:
    member = key.member
    if member is not None:
        person = member.get_full_name() or member.get_username()
        return f"{person} ({key.label or key.key_id})"
    return f"{key.label} ({key.key_id})" if key.label else key.key_id


def member_approver_keys(*, member_id: int, org_ids: Iterable[int]) -> QuerySet[ApproverKey]:
    """The keys ``member_id`` holds in those orgs, newest first, revoked ones too."""
    return (
        ApproverKey.objects.filter(member_id=member_id, org_id__in=list(org_ids))
        .select_related("org")
        .order_by("-created_at", "-id")
    )


def approval_reminder_recipients(approval: Approval) -> list[int]:
    """The members holding the roster's keys who have not voted yet (user ids)."""
    voted = set(approval.counted_votes().values_list("approver_public_key", flat=True))
    waiting = [key for key in approval_roster(approval) if key not in voted]
    return sorted(
        {
            member
            for member in ApproverKey.objects.filter(
                org_id=approval.org_id, public_key__in=waiting, member__isnull=False
            ).values_list("member_id", flat=True)
            if member is not None
        }
    )


def approval_escalation_recipients(approval: Approval) -> list[int]:
    """The escalation list's members (user ids) of the setting the approval falls under."""
    settings = {
        setting.rule_id: setting
        for setting in ApprovalEscalation.objects.filter(
            org_id=approval.org_id, rule_id__in=[approval.rule_id, ""]
        )
    }
    setting = settings.get(approval.rule_id) or settings.get("")
    if setting is None:
        return []
    return sorted({int(user_id) for user_id in setting.escalate_to if isinstance(user_id, int)})
