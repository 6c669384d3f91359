"""The task workers' own rows: their leases and the periodic scheduler's slots.

Both tables were made by the ``events`` app, when the worker lived there; they keep their
names (``db_table``), so moving the models here moved no data (migration common 0001 and
events 0006 change Django's state only).
"""

from __future__ import annotations

from django.db import models


class PeriodicSlot(models.Model):
    """One periodic task's run for one time slot: the scheduler inserts the slot and
    enqueues only when the insert succeeds, so any number of schedulers enqueue it once."""

    name = models.CharField(max_length=64)
    slot = models.BigIntegerField()  # the slot's start, seconds since the epoch
    enqueued_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "events_periodicslot"
        constraints = [
            models.UniqueConstraint(fields=["name", "slot"], name="events_periodic_slot_once")
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.slot}"


class TaskWorker(models.Model):
    """A running ``manage.py run_worker`` process, seen alive at ``seen_at``.

    Its heartbeat renews ``seen_at`` every third of ``TASK_WORKER_LEASE_SECONDS``; a task
    still marked running by a worker not seen for a whole lease was abandoned (the process
    was killed, or lost the database for that long) and is handed to another worker."""

    worker_id = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    queues = models.JSONField(default=list)
    # The ids of the tasks it was running at its last heartbeat.
    running = models.JSONField(default=list)
    started_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "events_taskworker"
        ordering = ["worker_id"]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.hostname}:{self.pid})"
