"""The audit app's background work: the retention sweep of receipt bodies
(:mod:`apps.audit.retention`) and the deletion of finished evidence exports past their
retention (:func:`apps.audit.exports.evidence_exports_prune`); a legal hold keeps what it
covers from both."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django_tasks import task

from apps.audit.exports import evidence_exports_prune
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


@task(queue_name=PERIODIC_QUEUE)
def prune_evidence_exports() -> int:
    """Delete finished evidence exports past ``EVIDENCE_EXPORT_RETENTION_DAYS``; how many."""
    return evidence_exports_prune()


SCHEDULE = (
    # RETENTION_SWEEP_SECONDS = 0 turns retention off (nothing is archived or retired).
    Periodic(
        "sweep_receipt_retention",
        sweep_receipt_retention,
        lambda: settings.RETENTION_SWEEP_SECONDS,
    ),
    Periodic(
        "prune_evidence_exports", prune_evidence_exports, lambda: settings.RETENTION_PRUNE_SECONDS
    ),
)
