"""The background tasks (django-tasks, database backend) and how they are enqueued.

A task enqueued inside a transaction is a row of that transaction (the database backend
writes its queue in the same database), so it exists if and only if the change that
enqueued it commits; a worker sees it only then. With another backend (none is configured)
the enqueue waits for the commit instead.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_tasks import task
from django_tasks.base import Task
from django_tasks_db import DatabaseBackend

from apps.events.models import Delivery, DeliveryStatus, EmailSubscription, Event, WebhookEndpoint
from apps.tenancy.models import Membership, Role
from apps.transparency.services import transparency_publish_epoch

logger = logging.getLogger(__name__)


# Workers LISTEN on this channel (PostgreSQL): a trigger on the queue's table
# (migration events 0003) notifies it for every task due now, at the enqueue's commit
# (NOTIFY is transactional: a rolled-back enqueue wakes nobody), so a worker starts it
# at once instead of at its next poll, and the enqueue costs no extra statement.
WAKE_CHANNEL = "countersign_tasks"

# The queues (settings.TASKS names them), each served by threads of its own in every
# worker: a webhook attempt waits on someone else's server for up to its deadline, and
# one org's slow endpoint must hold up neither the periodic work every org depends on
# (approval expiry, transparency epochs, reclaiming) nor the rest (fan-out, emails,
# exports). A task's queue is part of its declaration below.
DEFAULT_QUEUE = "default"
PERIODIC_QUEUE = "periodic"
DELIVERIES_QUEUE = "deliveries"
QUEUES = (DEFAULT_QUEUE, PERIODIC_QUEUE, DELIVERIES_QUEUE)


def enqueue(work: Task[Any, Any], *args: Any, run_after: datetime | None = None) -> None:
    """Enqueue ``work(*args)`` as part of the current transaction (see the module doc)."""
    chosen = work if run_after is None else work.using(run_after=run_after)
    if isinstance(chosen.get_backend(), DatabaseBackend):
        chosen.enqueue(*args)
    else:
        transaction.on_commit(lambda: chosen.enqueue(*args))


@task()
def fan_out_event(event_pk: int) -> int:
    """Make a recorded event's deliveries (and emails); how many deliveries."""
    from apps.events.services import event_fan_out

    event = Event.objects.filter(pk=event_pk).first()
    if event is None:  # its org was deleted meanwhile
        return 0
    return len(event_fan_out(event=event))


@task(queue_name=DELIVERIES_QUEUE)
def deliver_webhook(delivery_id: int) -> str:
    from apps.events.delivery import delivery_attempt

    return delivery_attempt(delivery_id)


def _recipients(org_id: int, user_ids: list[int]) -> list[str]:
    """Addresses of active users who are still members of the org."""
    members = Membership.objects.filter(org_id=org_id, user_id__in=user_ids).values_list(
        "user_id", flat=True
    )
    users = get_user_model().objects.filter(pk__in=list(members), is_active=True)
    return sorted({user.email for user in users if user.email})


def _send(org_id: int, user_ids: list[int], subject: str, body: str) -> int:
    """One mail to each of those members who is active and has an address; how many."""
    return sum(send_mail(subject, body, None, [to]) for to in _recipients(org_id, user_ids))


@task()
def send_event_emails(event_pk: int) -> int:
    """Email an approval event to the members who opted in to its type; how many."""
    from apps.events.emails import event_email

    event = Event.objects.select_related("org").get(pk=event_pk)
    user_ids = list(
        EmailSubscription.objects.filter(org_id=event.org_id, event_type=event.type).values_list(
            "user_id", flat=True
        )
    )
    return _send(event.org_id, user_ids, *event_email(event))


@task()
def send_endpoint_disabled_email(endpoint_pk: int) -> int:
    """``endpoint.disabled``: tell the org's owners their endpoint stopped receiving."""
    from apps.events.emails import endpoint_disabled_email

    endpoint = WebhookEndpoint.objects.select_related("org").get(pk=endpoint_pk)
    owners = list(
        Membership.objects.filter(org_id=endpoint.org_id, role=Role.OWNER).values_list(
            "user_id", flat=True
        )
    )
    return _send(endpoint.org_id, owners, *endpoint_disabled_email(endpoint))


# --- periodic work (enqueued by apps.events.periodic) -------------------------------------


@task(queue_name=PERIODIC_QUEUE)
def sweep_approvals() -> int:
    """Apply overdue approvals' on_timeout outcome (was ``manage.py sweep_approvals``)."""
    from apps.approvals.services import approvals_sweep

    return approvals_sweep()


@task(queue_name=PERIODIC_QUEUE)
def publish_transparency_epoch() -> int:
    """One transparency log epoch (extend the org trees, publish a checkpoint if any grew);
    idempotent, one transaction: a crash mid-run publishes nothing. The epoch number, or 0
    when nothing was new."""
    result = transparency_publish_epoch()
    return result.epoch if result.published and result.epoch is not None else 0


@task(queue_name=PERIODIC_QUEUE)
def fold_receipt_rollups() -> int:
    """Fold newly mirrored receipts into the per-org daily rollups the dashboard reads;
    entries folded. Reads stay exact without it (they add what is not folded yet); it keeps
    what they add small."""
    from apps.analytics.services import rollups_catch_up

    return rollups_catch_up()


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
def prune_task_results() -> int:
    """Delete finished task rows older than TASK_RESULT_RETENTION_DAYS."""
    from django_tasks_db.models import DBTaskResult

    days = settings.TASK_RESULT_RETENTION_DAYS
    if not days:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    deleted, _ = DBTaskResult.objects.finished().filter(finished_at__lt=cutoff).delete()
    return deleted


@task(queue_name=PERIODIC_QUEUE)
def reclaim_tasks() -> int:
    """Put the tasks of workers that died back on the queue (apps.events.workers); how
    many were requeued or failed."""
    from apps.events.workers import tasks_reclaim

    result = tasks_reclaim()
    return len(result.requeued) + len(result.failed)


@task()
def build_evidence_export(job_pk: int) -> str:
    from apps.events.exports import evidence_export_build

    return evidence_export_build(job_pk=job_pk)
