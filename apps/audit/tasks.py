"""The audit app's periodic work: deleting finished evidence exports past their retention
(:func:`apps.audit.exports.evidence_exports_prune`; a legal hold keeps what it covers)."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from apps.audit.exports import evidence_exports_prune
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE


@task(queue_name=PERIODIC_QUEUE)
def prune_evidence_exports() -> int:
    """Delete finished evidence exports past ``EVIDENCE_EXPORT_RETENTION_DAYS``; how many."""
    return evidence_exports_prune()


SCHEDULE = (
    Periodic(
        "prune_evidence_exports", prune_evidence_exports, lambda: settings.RETENTION_PRUNE_SECONDS
    ),
)
