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

The apps whose tasks hold state of their own hook in here (from their ``AppConfig.ready``;
this floor imports no app): :func:`on_beat` runs at every heartbeat with the tasks the
process is running (``events`` extends the claims of the webhook deliveries it is sending,
so a slow receiver never makes a claim run out under a worker that is still on it), and
:func:`on_reclaim` inside the reclaim's transaction (``events`` gives up the claims of the
deliveries whose attempt died, ``audit`` settles the evidence exports being built).

The ground floor's own periodic tasks live here too: the reclaim, and the pruning of
finished task rows.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.crypto import get_random_string
from django_tasks import task
from django_tasks_db.models import DBTaskResult

from apps.common.models import TaskWorker
from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE

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
    vouched: dict[str, set[str]]  # live worker id -> the task ids it said it was running
    now: datetime


# What apps run at each heartbeat (the tasks this process runs, the beat's time) and after
# each reclaim (in its transaction); see the module doc.
BeatHook = Callable[[list[InFlight], datetime], None]
ReclaimHook = Callable[[Reclaimed], None]
_beat_hooks: list[BeatHook] = []
_reclaim_hooks: list[ReclaimHook] = []


def on_beat(hook: BeatHook) -> None:
    if hook not in _beat_hooks:
        _beat_hooks.append(hook)


def on_reclaim(hook: ReclaimHook) -> None:
    if hook not in _reclaim_hooks:
        _reclaim_hooks.append(hook)


def lease() -> timedelta:
    return timedelta(seconds=settings.TASK_WORKER_LEASE_SECONDS)


def default_worker_id() -> str:
    """Readable in the queue's rows and unique enough: host, process id, a random tail."""
    return f"{socket.gethostname()[:40]}.{os.getpid()}.{get_random_string(6)}"


def task_worker_beat(
    *, worker_id: str, queues: list[str], running: list[InFlight], now: datetime | None = None
) -> TaskWorker:
    """Renew this worker's lease (made on the first beat); the apps' beat hooks run in
    the same transaction."""
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
        for hook in _beat_hooks:
            hook(running, now)
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
    must not kill every worker in turn); then the apps' reclaim hooks settle what those
    tasks held, in the same transaction."""
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
        reclaimed = Reclaimed(requeued, failed, vouched, now)
        for hook in _reclaim_hooks:
            hook(reclaimed)
        # Leases of workers gone for a day (killed ones never give theirs up).
        TaskWorker.objects.filter(seen_at__lt=Now() - timedelta(days=1)).delete()
    for task_id in requeued:
        logger.warning("task %s: its worker stopped while running it; queued again", task_id)
    for task_id in failed:
        logger.error("task %s: its worker stopped while running it too often; failed", task_id)
    return reclaimed


@task(queue_name=PERIODIC_QUEUE)
def prune_task_results() -> int:
    """Delete finished task rows older than TASK_RESULT_RETENTION_DAYS."""
    days = settings.TASK_RESULT_RETENTION_DAYS
    if not days:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    deleted, _ = DBTaskResult.objects.finished().filter(finished_at__lt=cutoff).delete()
    return deleted


@task(queue_name=PERIODIC_QUEUE)
def reclaim_tasks() -> int:
    """Put the tasks of workers that died back on the queue; how many were requeued or
    failed."""
    result = tasks_reclaim()
    return len(result.requeued) + len(result.failed)


SCHEDULE = (
    Periodic("prune_task_results", prune_task_results, lambda: 86_400),
    # Tasks of workers that died: looked for once per lease.
    Periodic("reclaim_tasks", reclaim_tasks, lambda: settings.TASK_WORKER_LEASE_SECONDS),
)
