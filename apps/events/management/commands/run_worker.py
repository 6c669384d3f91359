"""``manage.py run_worker``: a task worker (django-tasks' database worker) that also
enqueues the periodic tasks when they are due (apps.events.periodic).

Run one per machine or more; they share the queue. ``make run`` starts one beside the
development server; deploy/ runs it as its own service (compose, systemd).
"""

from __future__ import annotations

import logging
import threading
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection
from django.utils.crypto import get_random_string
from django_tasks_db.management.commands.db_worker import Worker

from apps.events.periodic import enqueue_due, forget_old_slots

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run a background task worker that also enqueues due periodic tasks."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--interval", type=float, default=0.5,
            help="Seconds between polls of an empty queue (default 0.5).",
        )  # fmt: skip
        parser.add_argument(
            "--tick", type=float, default=5.0,
            help="Seconds between checks for due periodic tasks (default 5).",
        )  # fmt: skip
        parser.add_argument(
            "--no-periodic", action="store_true",
            help="Only run tasks; leave periodic scheduling to other workers.",
        )  # fmt: skip
        parser.add_argument("--batch", action="store_true", help="Run the ready tasks, then exit.")
        parser.add_argument("--worker-id", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        if not options["no_periodic"] and not options["batch"]:
            threading.Thread(
                target=_schedule, args=(stop, options["tick"]), name="periodic", daemon=True
            ).start()
        worker = Worker(
            queue_names=["*"],
            interval=options["interval"],
            batch=options["batch"],
            backend_name="default",
            startup_delay=not options["batch"],
            max_tasks=None,
            worker_id=options["worker_id"] or get_random_string(32),
            excluded_queue_names=[],
        )
        worker.configure_signals()
        try:
            worker.run()
        finally:
            stop.set()


def _schedule(stop: threading.Event, tick: float) -> None:
    runs = 0
    while not stop.is_set():
        try:
            close_old_connections()
            enqueue_due()
            runs += 1
            if runs % 720 == 1:
                forget_old_slots()
        except Exception:
            logger.exception("periodic scheduling failed; trying again")
            connection.close()
        stop.wait(tick)
