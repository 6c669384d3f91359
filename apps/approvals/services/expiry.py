"""Applying an approval's expiry (server.md §6): what its signed ``on_timeout`` says once
the expiry passes undecided. Written by the periodic sweep (``approvals_sweep``, on the task
engine, and the ``sweep_approvals`` command) and by the vote path under its lock; reads
never write (:func:`apps.approvals.selectors.approval_as_of` shows the outcome without
storing it)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from apps.approvals.models import Approval, ApprovalStatus
from apps.approvals.services.history import approval_event
from apps.common import metrics


def expire_locked(approval: Approval, now: datetime) -> bool:
    """Apply the on_timeout outcome to a locked pending approval past its expiry, with its
    history row; False when there is nothing to apply."""
    outcome = approval.expiry_outcome(now)
    if outcome is None:
        return False
    for name, value in outcome.items():
        setattr(approval, name, value)
    if approval.status == ApprovalStatus.PENDING:
        approval_event(approval, "flagged", now, flag=approval.flag)
    else:
        event_outcome = "rejected" if approval.status == ApprovalStatus.REJECTED else "expired"
        approval_event(approval, "expired", now, outcome=event_outcome)
        metrics.approval_transition(approval.status)
    approval.save(update_fields=["status", "resolved_at", "flag"])
    return True


def approvals_sweep(*, now: datetime | None = None) -> int:
    """Apply every overdue pending approval's on_timeout outcome; the number changed."""
    now = now or timezone.now()
    changed = 0
    overdue = Approval.objects.overdue_at(now).values_list("pk", flat=True)
    for pk in list(overdue):
        with transaction.atomic():
            locked = Approval.objects.select_for_update().get(pk=pk)
            changed += expire_locked(locked, now)
    return changed
