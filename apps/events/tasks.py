"""The events app's periodic work, and where its tasks are.

Each task is declared beside the work it runs, so that the modules enqueueing one import
it from below (no module of this app imports one above it): ``fan_out_event`` in
:mod:`apps.events.services`, ``deliver_webhook`` in :mod:`apps.events.delivery`, the
emails' in :mod:`apps.events.emails`. The task engine itself (``enqueue``, the queues, the
scheduler, the worker) is on the ground floor (:mod:`apps.common.tasks`).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_tasks import task

from apps.analytics.tasks import fold_receipt_rollups
from apps.approvals.tasks import sweep_approvals
from apps.audit.exports import build_evidence_export
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE, enqueue
from apps.common.workers import prune_task_results, reclaim_tasks
from apps.events.delivery import deliver_webhook
from apps.events.emails import send_endpoint_disabled_email, send_event_emails
from apps.events.models import Delivery, DeliveryStatus
from apps.events.services import delivery_log_prune, fan_out_event
from apps.transparency.tasks import publish_transparency_epoch


@task(queue_name=PERIODIC_QUEUE)
def sweep_deliveries() -> int:
    """Re-enqueue deliveries that are due but have no live task: a claim that ran out (a
    worker died mid-attempt) or a retry whose task was lost. A second task for a delivery
    is harmless: only one claims each attempt."""
    now = timezone.now()
    grace = timedelta(seconds=settings.DELIVERY_SWEEP_SECONDS)
    stale = Delivery.objects.filter(
        Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now - grace)
        | Q(status=DeliveryStatus.SENDING, claimed_until__lt=now)
    ).values_list("pk", flat=True)[:1000]
    count = 0
    with transaction.atomic():
        for pk in stale:
            enqueue(deliver_webhook, pk)
            count += 1
    return count


@task(queue_name=PERIODIC_QUEUE)
def prune_delivery_log() -> int:
    """Delete the delivery log past ``WEBHOOK_DELIVERY_RETENTION_DAYS``; events deleted."""
    return delivery_log_prune()


SCHEDULE = (
    Periodic("sweep_deliveries", sweep_deliveries, lambda: settings.DELIVERY_SWEEP_SECONDS),
    Periodic("prune_delivery_log", prune_delivery_log, lambda: settings.RETENTION_PRUNE_SECONDS),
)

# Until the next release: the tasks that lived here, importable at their old paths. The
# queue stores a task's dotted path; a task enqueued under one of these by a process still
# running the previous release (a web process or a worker not yet restarted during the
# upgrade) runs here as the task it names. Rows queued before the upgrade were rewritten
# to the new paths by migration events 0006.
MOVED = {
    "fan_out_event": fan_out_event,
    "deliver_webhook": deliver_webhook,
    "send_event_emails": send_event_emails,
    "send_endpoint_disabled_email": send_endpoint_disabled_email,
    "sweep_approvals": sweep_approvals,
    "publish_transparency_epoch": publish_transparency_epoch,
    "fold_receipt_rollups": fold_receipt_rollups,
    "prune_task_results": prune_task_results,
    "reclaim_tasks": reclaim_tasks,
    "build_evidence_export": build_evidence_export,
}
__all__ = ["SCHEDULE", "prune_delivery_log", "sweep_deliveries", *MOVED]
