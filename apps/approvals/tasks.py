"""The approvals' background work: applying overdue approvals' ``on_timeout`` outcome, and
reminding and escalating the pending ones."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from apps.approvals.services import approvals_escalate, approvals_sweep
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE


@task(queue_name=PERIODIC_QUEUE)
def sweep_approvals() -> int:
    """Apply overdue approvals' on_timeout outcome (was ``manage.py sweep_approvals``)."""
    return approvals_sweep()


@task(queue_name=PERIODIC_QUEUE)
def escalate_approvals() -> int:
    """Remind rosters and escalate approvals near their expiry (ApprovalEscalation)."""
    return approvals_escalate()


SCHEDULE = (
    Periodic("sweep_approvals", sweep_approvals, lambda: settings.APPROVAL_SWEEP_SECONDS),
    # The same period: a reminder or an escalation is late by at most one sweep.
    Periodic("escalate_approvals", escalate_approvals, lambda: settings.APPROVAL_SWEEP_SECONDS),
)
