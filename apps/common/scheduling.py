"""Periodic work on the task engine, which has no clock of its own.

Each app declares its periodic tasks (a ``SCHEDULE`` of :class:`Periodic` beside its
tasks) and registers them from its ``AppConfig.ready`` with :func:`register`; this floor
imports no app. Each worker (``manage.py run_worker``) runs :func:`enqueue_due` every few
seconds beside its task loop. A periodic task's runs are numbered by time slot
(``now // every``); the slot's row is inserted in the same transaction as the task, and
the unique constraint lets exactly one of any number of workers enqueue a slot. The insert
is ``ON CONFLICT DO NOTHING``: a scheduler that finds the slot taken learns it from the
empty ``RETURNING``, not from a unique violation, so losing the race (every tick, for
every worker but one) writes no error into the database server's log and aborts no
transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django_tasks.base import Task

from apps.common.models import PeriodicSlot
from apps.common.tasks import enqueue


@dataclass(frozen=True)
class Periodic:
    name: str
    work: Task[Any, Any]
    every: Callable[[], int]  # seconds, read from settings at each tick


# name -> its declaration, in the order the apps registered them (INSTALLED_APPS order).
_registry: dict[str, Periodic] = {}


def register(*periodic: Periodic) -> None:
    """Add an app's periodic tasks to the schedule (again: the same declaration is kept
    once; another task under a taken name is a mistake, refused)."""
    for each in periodic:
        known = _registry.get(each.name)
        if known is not None and known.work.module_path != each.work.module_path:
            raise ValueError(
                f"periodic task {each.name!r} is already {known.work.module_path}, "
                f"not {each.work.module_path}"
            )
        _registry[each.name] = each


def schedule() -> tuple[Periodic, ...]:
    """Every registered periodic task."""
    return tuple(_registry.values())


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
    for periodic in schedule():
        every = periodic.every()
        if every <= 0:
            continue  # turned off

        slot = int(now // every) * every
        with transaction.atomic():
            if not periodic_slot_claim(name=periodic.name, slot=slot):
                continue  # another worker has it
            enqueue(periodic.work)
        enqueued.append(periodic.name)
    return enqueued


def forget_old_slots(keep_seconds: int = 7 * 86_400) -> None:
    PeriodicSlot.objects.filter(slot__lt=int(time.time()) - keep_seconds).delete()
