"""The task workers' leases, and what happens to the tasks of a worker that died.

django-tasks' database backend marks a task ``RUNNING`` when a worker claims it and
nothing ever looks at it again: a worker killed mid-task (SIGKILL, OOM, a lost machine)
leaves it running for good, and the work it stood for (an event's fan-out, an export)
never happens. Here every ``run_worker`` process keeps a lease (a :class:`TaskWorker`
row) that its heartbeat renews with the ids of the tasks it is running at that moment;
:func:`tasks_reclaim` (a periodic task) puts back on the queue every task still marked
running that no live lease vouches for. Work is therefore done at least once: a task
body must tolerate a second run (the fan-out finds the deliveries it made, a delivery's
claim lets one attempt through and keeps its ``webhook-id``, an export is rebuilt).

The heartbeat also extends the claims of the webhook deliveries its process is sending,
so a slow receiver never makes a claim run out under a worker that is still on it.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest, Now
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.events.models import (
    Delivery,
    DeliveryStatus,
    EvidenceExportJob,
    ExportStatus,
    TaskWorker,
)

logger = logging.getLogger(__name__)

READY = "READY"
RUNNING = "RUNNING"
FAILED = "FAILED"


class WorkerLost(Exception):
    """Recorded as the failure of a task whose workers kept dying while running it."""


@dataclass(frozen=True)
class InFlight:
    """A task this process is running: its row's id, its task's path and arguments."""

    task_id: str
    task_path: str
    args: tuple[object, ...]


@dataclass(frozen=True)
class Reclaimed:
    requeued: list[str]  # task ids put back on the queue
    failed: list[str]  # task ids failed after TASK_MAX_ATTEMPTS runs
    exports_requeued: int
    exports_failed: int


def lease() -> timedelta:
    return timedelta(seconds=settings.TASK_WORKER_LEASE_SECONDS)


def default_worker_id() -> str:
    """Readable in the queue's rows and unique enough: host, process id, a random tail."""
    from django.utils.crypto import get_random_string

    return f"{socket.gethostname()[:40]}.{os.getpid()}.{get_random_string(6)}"


def task_worker_beat(
    *, worker_id: str, queues: list[str], running: list[InFlight], now: datetime | None = None
) -> TaskWorker:
    """Renew this worker's lease (made on the first beat) and extend the claims of the
    deliveries it is sending."""
    from apps.events.tasks import deliver_webhook

    now = now or timezone.now()
    with transaction.atomic():
        worker, _ = TaskWorker.objects.update_or_create(
            worker_id=worker_id,
            defaults={
                # The database's clock, which every worker's lease is judged by: a
                # machine whose clock lags must not look dead to the others.
                "seen_at": Now(),
                "queues": queues,
                "running": sorted(item.task_id for item in running),
                "hostname": socket.gethostname()[:255],
                "pid": os.getpid(),
            },
        )
        sending = [
            item.args[0]
            for item in running
            if item.task_path == deliver_webhook.module_path and item.args
        ]
        if sending:
            # Never shortens a claim; a delivery that is no longer "sending" (the attempt
            # was recorded meanwhile) is left alone.
            Delivery.objects.filter(pk__in=sending, status=DeliveryStatus.SENDING).update(
                claimed_until=Greatest(F("claimed_until"), now + lease())
            )
    return worker


def task_worker_forget(*, worker_id: str) -> None:
    """A worker stopping cleanly gives its lease up (its tasks have finished)."""
    TaskWorker.objects.filter(worker_id=worker_id).delete()


def _vouched() -> dict[str, set[str]]:
    """Live workers (seen within a lease, by the database's clock) and the tasks each said
    it was running."""
    rows = TaskWorker.objects.filter(seen_at__gte=Now() - lease()).values_list(
        "worker_id", "running"
    )
    return {worker_id: set(running or []) for worker_id, running in rows}


def tasks_reclaim(*, now: datetime | None = None) -> Reclaimed:
    """Put back on the queue every task marked running for longer than a lease that no
    live worker is running (its worker died or lost the database for a whole lease), or
    fail it once it has been tried TASK_MAX_ATTEMPTS times (a task that kills its worker
    must not kill every worker in turn); then settle the evidence exports those tasks
    were building."""
    now = now or timezone.now()
    requeued: list[str] = []
    failed: list[str] = []
    with transaction.atomic():
        vouched = _vouched()
        stale = (
            DBTaskResult.objects.filter(status=RUNNING, started_at__lt=now - lease())
            .select_for_update(skip_locked=True)
            .only("id", "worker_ids", "status")
        )
        for result in stale:
            owner = result.worker_ids[-1] if result.worker_ids else ""
            if str(result.id) in vouched.get(owner, set()):
                continue  # a live worker is still on it (a long export)
            if len(result.worker_ids) >= settings.TASK_MAX_ATTEMPTS:
                failed.append(str(result.id))
            else:
                requeued.append(str(result.id))
        if requeued:
            DBTaskResult.objects.filter(pk__in=requeued).update(status=READY)
            _release_deliveries(requeued, vouched, now)
        if failed:
            DBTaskResult.objects.filter(pk__in=failed).update(
                status=FAILED,
                finished_at=now,
                return_value=None,
                exception_class_path=f"{WorkerLost.__module__}.{WorkerLost.__qualname__}",
                traceback=(
                    f"{WorkerLost.__name__}: its worker stopped while running it, "
                    f"{settings.TASK_MAX_ATTEMPTS} times; not run again\n"
                ),
            )
        exports_requeued, exports_failed = _settle_exports()
        # Leases of workers gone for a day (killed ones never give theirs up).
        TaskWorker.objects.filter(seen_at__lt=Now() - timedelta(days=1)).delete()
    for task_id in requeued:
        logger.warning("task %s: its worker stopped while running it; queued again", task_id)
    for task_id in failed:
        logger.error("task %s: its worker stopped while running it too often; failed", task_id)
    return Reclaimed(requeued, failed, exports_requeued, exports_failed)


def _release_deliveries(requeued: list[str], vouched: dict[str, set[str]], now: datetime) -> None:
    """A webhook attempt whose worker died holds its delivery's claim until the claim runs
    out (a few timeouts); its task, queued again, could then only answer "not due" and the
    delivery would wait for the sweep. The claim is given up at once, unless a live worker
    is running another task for the same delivery (which then holds the claim)."""
    from apps.events.tasks import deliver_webhook

    path = deliver_webhook.module_path
    live = set().union(*vouched.values()) if vouched else set()
    for args_kwargs in DBTaskResult.objects.filter(pk__in=requeued, task_path=path).values_list(
        "args_kwargs", flat=True
    ):
        args = args_kwargs.get("args") or []
        if not args:
            continue
        running_for_it = DBTaskResult.objects.filter(
            status=RUNNING, task_path=path, args_kwargs__args=args
        ).values_list("id", flat=True)
        if any(str(task_id) in live for task_id in running_for_it):
            continue
        Delivery.objects.filter(pk=args[0], status=DeliveryStatus.SENDING).update(claimed_until=now)


def _settle_exports() -> tuple[int, int]:
    """An unfinished export is built only by its task: back to pending when its task was
    queued again (rebuilt from the start), failed with the reason when its task will not
    run again (a worker died before the build marked the job running, too)."""
    from apps.events.tasks import build_evidence_export

    unfinished = (ExportStatus.PENDING, ExportStatus.RUNNING)
    again = failed = 0
    for job_pk, status in EvidenceExportJob.objects.filter(status__in=unfinished).values_list(
        "pk", "status"
    ):
        states = set(
            DBTaskResult.objects.filter(
                task_path=build_evidence_export.module_path, args_kwargs__args=[job_pk]
            ).values_list("status", flat=True)
        )
        if RUNNING in states or (READY in states and status == ExportStatus.PENDING):
            continue
        job = EvidenceExportJob.objects.filter(pk=job_pk, status=status)
        if READY in states:
            again += job.update(status=ExportStatus.PENDING)
            continue
        failed += job.update(
            status=ExportStatus.FAILED,
            error="interrupted: the worker building it stopped; request a new export",
            finished_at=timezone.now(),
        )
    return again, failed
