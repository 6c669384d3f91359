"""Reading an approval: its expiry outcome applied, who may vote on it, its roster."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone

from apps.approvals.errors import (
    ApprovalNotFound,
)
from apps.approvals.models import (
    Approval,
    ApprovalFlag,
    ApprovalStatus,
    ApproverKey,
)
from apps.approvals.services.history import approval_event
from apps.approvals.services.suspension import approval_resolve, signed_approval_block
from apps.common import metrics
from apps.tenancy.models import Org


def expire_locked(approval: Approval, now: datetime) -> bool:
    """Apply the on_timeout outcome to a locked pending approval past its expiry."""
    if approval.status != ApprovalStatus.PENDING or approval.expires_at is None:
        return False
    if now <= approval.expires_at:
        return False
    if approval.on_timeout == "deny":
        approval.status = ApprovalStatus.REJECTED
        approval.resolved_at = now
        approval_event(approval, "expired", now, outcome="rejected")
        metrics.approval_transition(ApprovalStatus.REJECTED)
    elif approval.on_timeout in ("escalate", "auto_approve"):
        # Nobody signed, so the service never approves on its own: it stays pending.
        flag = (
            ApprovalFlag.ESCALATED
            if approval.on_timeout == "escalate"
            else ApprovalFlag.AUTO_APPROVE_REFUSED
        )
        if approval.flag == flag:
            return False
        approval.flag = flag
        approval_event(approval, "flagged", now, flag=flag)
    else:
        approval.status = ApprovalStatus.EXPIRED
        approval.resolved_at = now
        approval_event(approval, "expired", now, outcome="expired")
        metrics.approval_transition(ApprovalStatus.EXPIRED)
    approval.save(update_fields=["status", "resolved_at", "flag"])
    return True


def approval_refresh(approval: Approval, *, now: datetime | None = None) -> Approval:
    """The approval with its expiry applied (the write happens only when it changes)."""
    now = now or timezone.now()
    if approval.status != ApprovalStatus.PENDING or approval.expires_at is None:
        return approval
    if now <= approval.expires_at:
        return approval
    with transaction.atomic():
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        expire_locked(locked, now)
    return locked


def approval_get_by_id(*, org: Org, approval_id: str) -> Approval:
    """The org's approval with ``approval_id``, its expiry applied; another org's is 404."""
    approval = Approval.objects.filter(org=org, approval_id=approval_id).first()
    if approval is None:
        raise ApprovalNotFound(f"no approval {approval_id!r} for this team")
    return approval_refresh(approval)


def approval_get(*, org: Org, action_hash: str) -> Approval:
    """The approval ``action_hash`` names (the content hash or the suspend ticket)."""
    approval = approval_resolve(org=org, ref=action_hash)
    if approval is None:
        raise ApprovalNotFound("no approval for this action_hash")
    return approval_refresh(approval)


def approvals_sweep(*, now: datetime | None = None) -> int:
    """Apply every overdue pending approval's on_timeout outcome; the number changed."""
    now = now or timezone.now()
    changed = 0
    overdue = Approval.objects.filter(
        status=ApprovalStatus.PENDING, expires_at__lt=now
    ).values_list("pk", flat=True)
    for pk in list(overdue):
        with transaction.atomic():
            locked = Approval.objects.select_for_update().get(pk=pk)
            changed += expire_locked(locked, now)
    return changed


def eligible_approvers(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """Who may vote now: the frozen roster's keys still active once the first vote froze
    it; before that, the org's active keys narrowed to the suspension's signed
    ``approver_pubkeys`` when that list is non-empty (an empty list narrows nothing)."""
    active = set(
        ApproverKey.objects.filter(org_id=approval.org_id, revoked_at__isnull=True).values_list(
            "public_key", flat=True
        )
    )
    if approval.roster_frozen_at is not None:
        return sorted(active & set(approval.roster))
    if content is None and approval.suspended_content:
        content = orjson.loads(approval.suspended_content)
    listed = signed_approval_block(content).get("approver_pubkeys")
    if isinstance(listed, list) and listed:
        active &= {key for key in listed if isinstance(key, str)}
    return sorted(active)


def approval_roster(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """The roster a quorum leg signs over: frozen, or the one the next vote would freeze."""
    if approval.roster_frozen_at is not None:
        return list(approval.roster)
    return eligible_approvers(approval, content=content)
