"""Periodic work on the task engine, which has no clock of its own.

Each worker (``manage.py run_worker``) runs :func:`enqueue_due` every few seconds beside
its task loop. A periodic task's runs are numbered by time slot (``now // every``); the
slot's row is inserted in the same transaction as the task, and the unique constraint lets
exactly one of any number of workers enqueue a slot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
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
)


def enqueue_due(now: float | None = None) -> list[str]:
    """Enqueue every periodic task whose current slot is not enqueued yet; their names."""
    now = time.time() if now is None else now
    enqueued = []
    for periodic in SCHEDULE:
        every = periodic.every()
        if every <= 0:
            continue  # turned off

        slot = int(now // every) * every
        try:
            with transaction.atomic():
                PeriodicSlot.objects.create(name=periodic.name, slot=slot)
                tasks.enqueue(periodic.work)
        except IntegrityError:
            continue  # another worker has it
        enqueued.append(periodic.name)
    return enqueued


def forget_old_slots(keep_seconds: int = 7 * 86_400) -> None:
    PeriodicSlot.objects.filter(slot__lt=int(time.time()) - keep_seconds).delete()
