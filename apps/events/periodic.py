"""Periodic work on the task engine, which has no clock of its own.

Each worker (``manage.py run_worker``) runs :func:`enqueue_due` every few seconds beside
its task loop. A periodic task's runs are numbered by time slot (``now // every``); the
slot's row is inserted in the same transaction as the task, and the unique constraint lets
exactly one of any number of workers enqueue a slot. The insert is ``ON CONFLICT DO
NOTHING``: a scheduler that finds the slot taken learns it from the empty ``RETURNING``,
not from a unique violation, so losing the race (every tick, for every worker but one)
writes no error into the database server's log and aborts no transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django_tasks.base import Task

from apps.events import tasks
from apps.events.models import PeriodicSlot


@dataclass(frozen=True)
class Periodic:
    name: str
    work: Task[Any, Any]
    every: Callable[[], int]  # seconds, read from settings at each tick


SCHEDULE = (
    Periodic("sweep_approvals", tasks.sweep_approvals, lambda: settings.APPROVAL_SWEEP_SECONDS),
    # The transparency log's epochs (transparency.md §3.3); 0 turns them off.
    Periodic(
        "publish_transparency_epoch",
        tasks.publish_transparency_epoch,
        lambda: settings.TRANSPARENCY_EPOCH_SECONDS,
    ),
    Periodic("sweep_deliveries", tasks.sweep_deliveries, lambda: settings.DELIVERY_SWEEP_SECONDS),
    Periodic(
        "fold_receipt_rollups", tasks.fold_receipt_rollups, lambda: settings.ROLLUP_FOLD_SECONDS
    ),
    Periodic("prune_task_results", tasks.prune_task_results, lambda: 86_400),
    # Tasks of workers that died (apps.events.workers): looked for once per lease.
    Periodic("reclaim_tasks", tasks.reclaim_tasks, lambda: settings.TASK_WORKER_LEASE_SECONDS),
)


def periodic_slot_claim(*, name: str, slot: int) -> bool:
    """Insert the slot's row unless it exists; whether this caller inserted it. Inside a
    transaction, a concurrent insert of the same slot waits for the other's outcome."""
    table = connection.ops.quote_name(PeriodicSlot._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (name, slot, enqueued_at) VALUES (%s, %s, %s) "  # noqa: S608 (a model's table name)
            "ON CONFLICT (name, slot) DO NOTHING RETURNING id",
            [name, slot, timezone.now()],
        )
        return cursor.fetchone() is not None


def enqueue_due(now: float | None = None) -> list[str]:
    """Enqueue every periodic task whose current slot is not enqueued yet; their names."""
    now = time.time() if now is None else now
    enqueued = []
    for periodic in SCHEDULE:
        every = periodic.every()
        if every <= 0:
            continue  # turned off

        slot = int(now // every) * every
        with transaction.atomic():
            if not periodic_slot_claim(name=periodic.name, slot=slot):
                continue  # another worker has it
            tasks.enqueue(periodic.work)
        enqueued.append(periodic.name)
    return enqueued


def forget_old_slots(keep_seconds: int = 7 * 86_400) -> None:
    PeriodicSlot.objects.filter(slot__lt=int(time.time()) - keep_seconds).delete()
