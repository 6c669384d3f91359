"""The task engine's ground floor: the queues and how work is enqueued.

A task enqueued inside a transaction is a row of that transaction (the database backend
writes its queue in the same database), so it exists if and only if the change that
enqueued it commits; a worker sees it only then. With another backend (none is configured)
the enqueue waits for the commit instead.

Each app declares its own tasks (in its ``tasks`` module, or beside the work they run) and
registers its periodic ones with :func:`apps.common.scheduling.register` from its
``AppConfig.ready``; the worker itself lives in :mod:`apps.common.workers` and
``manage.py run_worker``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django_tasks.base import Task
from django_tasks_db import DatabaseBackend

# Workers LISTEN on this channel (PostgreSQL): a trigger on the queue's table
# (migration events 0003) notifies it for every task due now, at the enqueue's commit
# (NOTIFY is transactional: a rolled-back enqueue wakes nobody), so a worker starts it
# at once instead of at its next poll, and the enqueue costs no extra statement.
WAKE_CHANNEL = "countersign_tasks"

# The queues (settings.TASKS names them), each served by threads of its own in every
# worker: a webhook attempt waits on someone else's server for up to its deadline, and
# one org's slow endpoint must hold up neither the periodic work every org depends on
# (approval expiry, transparency epochs, reclaiming) nor the rest (fan-out, emails,
# exports). A task's queue is part of its declaration.
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
