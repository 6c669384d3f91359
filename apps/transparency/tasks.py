"""The transparency log's background work: its epochs (transparency.md §3.3)."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE
from apps.transparency.services import transparency_publish_epoch


@task(queue_name=PERIODIC_QUEUE)
def publish_transparency_epoch() -> int:
    """One transparency log epoch (extend the org trees, publish a checkpoint if any grew);
    idempotent, one transaction: a crash mid-run publishes nothing. The epoch number, or 0
    when nothing was new."""
    result = transparency_publish_epoch()
    return result.epoch if result.published and result.epoch is not None else 0


SCHEDULE = (
    # TRANSPARENCY_EPOCH_SECONDS = 0 turns the epochs off.
    Periodic(
        "publish_transparency_epoch",
        publish_transparency_epoch,
        lambda: settings.TRANSPARENCY_EPOCH_SECONDS,
    ),
)
