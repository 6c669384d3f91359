"""The dashboard's background work: folding mirrored receipts into the daily rollups."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from apps.analytics.services import rollups_catch_up
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE


@task(queue_name=PERIODIC_QUEUE)
def fold_receipt_rollups() -> int:
    """Fold newly mirrored receipts into the per-org daily rollups the dashboard reads;
    entries folded. Reads stay exact without it (they add what is not folded yet); it keeps
    what they add small."""
    return rollups_catch_up()


SCHEDULE = (
    Periodic("fold_receipt_rollups", fold_receipt_rollups, lambda: settings.ROLLUP_FOLD_SECONDS),
)
