"""The approvals' background work: applying overdue approvals' ``on_timeout`` outcome."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from apps.approvals.services import approvals_sweep
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE


@task(queue_name=PERIODIC_QUEUE)
def sweep_approvals() -> int:
    """Apply overdue approvals' on_timeout outcome (was ``manage.py sweep_approvals``)."""
    return approvals_sweep()


SCHEDULE = (Periodic("sweep_approvals", sweep_approvals, lambda: settings.APPROVAL_SWEEP_SECONDS),)
