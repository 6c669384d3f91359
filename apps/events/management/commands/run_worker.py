"""``manage.py run_worker``: a task worker (django-tasks' database worker) that also
enqueues the periodic tasks when they are due (apps.events.periodic).

Between runs of the ready tasks it waits on PostgreSQL's ``LISTEN`` for the wake-up an
enqueue sends at commit (apps.events.tasks.WAKE_CHANNEL), or at most ``--interval``
seconds (a deferred retry becomes due without a wake-up; SQLite has no LISTEN). Run one
per machine or more; they share the queue (SKIP LOCKED). ``make run`` starts one beside
the development server; deploy/ runs it as its own service (compose, systemd).
"""

from __future__ import annotations

import logging
import threading
import time
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand
from django.db import close_old_connections, connection, connections
from django.utils.crypto import get_random_string
from django_tasks_db.management.commands.db_worker import Worker

from apps.events.periodic import enqueue_due, forget_old_slots
from apps.events.tasks import WAKE_CHANNEL

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run a background task worker that also enqueues due periodic tasks."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--interval", type=float, default=1.0,
            help="Most seconds between looks at the queue without a wake-up (default 1).",
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
        # The database worker logs every pass over the queue at INFO: kept for -v 2.
        quiet = logging.INFO if options["verbosity"] > 1 else logging.WARNING
        for name in ("django_tasks_db", "django_tasks", "django.tasks"):
            logging.getLogger(name).setLevel(quiet)
        stop = threading.Event()
        if not options["no_periodic"] and not options["batch"]:
            threading.Thread(
                target=_schedule, args=(stop, options["tick"]), name="periodic", daemon=True
            ).start()
        # Batch mode runs the ready tasks and returns; the loop below waits in between.
        worker = Worker(
            queue_names=["*"],
            interval=0,
            batch=True,
            backend_name="default",
            startup_delay=False,
            max_tasks=None,
            worker_id=options["worker_id"] or get_random_string(32),
            excluded_queue_names=[],
        )
        worker.configure_signals()  # SIGTERM: finish the running task, then stop
        waiter = _Waiter()
        try:
            while worker.running:
                worker.run()
                if options["batch"] or not worker.running:
                    break
                waiter.wait(options["interval"])
        finally:
            stop.set()
            waiter.close()


class _Waiter:
    """Waits for a NOTIFY on a connection of its own (PostgreSQL), else just sleeps."""

    def __init__(self) -> None:
        self._wrapper: Any = None
        if connection.vendor != "postgresql":
            return
        try:
            self._wrapper = connections.create_connection("default")
            self._wrapper.ensure_connection()
            self._wrapper.connection.autocommit = True
            self._wrapper.connection.execute(f"LISTEN {WAKE_CHANNEL}")
        except Exception:
            logger.warning("LISTEN unavailable; polling the queue instead", exc_info=True)
            self.close()

    def wait(self, seconds: float) -> None:
        if self._wrapper is None:
            time.sleep(seconds)
            return
        try:
            for _ in self._wrapper.connection.notifies(timeout=seconds, stop_after=1):
                pass
        except Exception:
            logger.warning("the LISTEN connection failed; reconnecting", exc_info=True)
            self.close()
            time.sleep(seconds)
            self.__init__()  # type: ignore[misc]

    def close(self) -> None:
        if self._wrapper is not None:
            try:
                self._wrapper.close()
            except Exception:
                logger.debug("closing the LISTEN connection failed", exc_info=True)
            self._wrapper = None


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
