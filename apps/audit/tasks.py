"""The audit app's background work: the retention sweep (apps.audit.retention)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django_tasks import task

from apps.audit.retention import retention_sweep
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE
from apps.tenancy.org_context import activate_all_orgs, activate_default


@task(queue_name=PERIODIC_QUEUE)
def sweep_receipt_retention() -> dict[str, Any]:
    """Archive, verify and retire every org's months past retention, resuming what an
    earlier run left unfinished; what it did and what blocked it. Across orgs, as
    operator commands run."""
    activate_all_orgs()
    try:
        return retention_sweep().as_dict()
    finally:
        activate_default()


SCHEDULE = (
    # RETENTION_SWEEP_SECONDS = 0 turns retention off (nothing is archived or retired).
    Periodic(
        "sweep_receipt_retention",
        sweep_receipt_retention,
        lambda: settings.RETENTION_SWEEP_SECONDS,
    ),
)
