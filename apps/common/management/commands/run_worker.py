"""``manage.py run_worker``: the task worker (django-tasks' database worker, run by threads
of its own for each queue) that also keeps its lease and enqueues the periodic tasks when
they are due (apps.common.scheduling).

- Queues: ``--queues default,periodic,deliveries:4`` (the default) serves each named queue
  with that many threads (1 when no count is given), each with its own database
  connection, so a slow webhook receiver holds up one delivery thread, never approval
  expiry, transparency epochs, emails or exports. One process per queue works as well
  (``--queues deliveries:8`` here, ``--queues default,periodic`` there).
- Wake-ups: between runs of the ready tasks each thread waits for the wake-up an enqueue
  sends at commit (PostgreSQL ``LISTEN`` on apps.common.tasks.WAKE_CHANNEL, one
  connection per process), or at most ``--interval`` seconds (a deferred retry or a
  reclaimed task becomes due without a wake-up; SQLite has no LISTEN).
- Lease: a housekeeping thread renews this worker's lease (apps.common.workers) every
  third of TASK_WORKER_LEASE_SECONDS with the tasks it is running, and enqueues the
  periodic ones every ``--tick`` seconds; the tasks of a worker that stops renewing are
  handed to another (at least once).
- The database going away is waited out: every thread retries with exponential backoff
  (from 0.5 s up to 30 s, with jitter) and carries on when it is back, at start-up too.
- SIGTERM or SIGINT: the running tasks finish, then the process exits; a second signal
  exits at once (the tasks it abandons are reclaimed after a lease).

Run one per machine or more; they share the queues (SKIP LOCKED). ``make run`` starts one
beside the development server; deploy/ runs it as its own service (compose, systemd).
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import threading
import time
from argparse import ArgumentParser, ArgumentTypeError
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import Error as DatabaseError
from django.db import close_old_connections, connection, connections
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from apps.common.scheduling import enqueue_due, forget_old_slots
from apps.common.tasks import QUEUES, WAKE_CHANNEL
from apps.common.workers import InFlight, default_worker_id, task_worker_beat, task_worker_forget

logger = logging.getLogger(__name__)

DEFAULT_QUEUES = "default,periodic,deliveries:4"


def queue_spec(value: str) -> list[tuple[str, int]]:
    """``name[:threads],...`` as (name, threads) pairs; every name a configured queue."""
    pairs: list[tuple[str, int]] = []
    for item in value.split(","):
        name, _, count = item.strip().partition(":")
        if name not in QUEUES:
            raise ArgumentTypeError(f"unknown queue {name!r}; the queues are {', '.join(QUEUES)}")
        try:
            threads = int(count) if count else 1
        except ValueError:
            raise ArgumentTypeError(f"{item!r}: the thread count must be a number") from None
        if not 1 <= threads <= 64:
            raise ArgumentTypeError(f"{item!r}: between 1 and 64 threads")
        if name in dict(pairs):
            raise ArgumentTypeError(f"queue {name!r} named twice")
        pairs.append((name, threads))
    return pairs


class Backoff:
    """Exponential waits with jitter while the database is away: 0.5 s doubling to 30 s."""

    def __init__(self, first: float = 0.5, most: float = 30.0) -> None:
        self.first, self.most, self.failures = first, most, 0

    def next(self) -> float:
        self.failures += 1
        delay = min(self.most, self.first * 2 ** (self.failures - 1))
        return float(delay * (0.5 + random.random() / 2))  # noqa: S311 (jitter, not a secret)

    def reset(self) -> None:
        self.failures = 0


class _Outage:
    """The database being away, shared by the process's threads: one line per backoff step
    (no traceback: an outage, not a bug) and one when it is back, whichever threads
    notice; every thread waits out the current step, then tries again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._backoff = Backoff()
        self._until = 0.0
        self._down = False

    def failed(self, where: str, failure: BaseException, stop: threading.Event) -> None:
        with self._lock:
            now = time.monotonic()
            if now >= self._until:
                delay = self._backoff.next()
                self._until = now + delay
                self._down = True
                detail = " ".join(str(failure).split())[:300] or type(failure).__name__
                logger.warning(
                    "database unavailable (%s: %s); retrying in %.1f s", where, detail, delay
                )
            wait = self._until - now
        with contextlib.suppress(DatabaseError):
            connection.close()  # this thread's broken connection: the next try opens one
        stop.wait(wait)

    def ok(self) -> None:
        if not self._down:  # the common case, read without the lock
            return
        with self._lock:
            if self._down:
                self._down = False
                self._backoff.reset()
                self._until = 0.0
                logger.warning("database available again; carrying on")


class _Running:
    """The tasks this process is running now, for the lease's heartbeat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[str, InFlight] = {}

    def add(self, item: InFlight) -> None:
        with self._lock:
            self._tasks[item.task_id] = item

    def remove(self, task_id: str) -> None:
        with self._lock:
            self._tasks.pop(task_id, None)

    def snapshot(self) -> list[InFlight]:
        with self._lock:
            return list(self._tasks.values())


class _QueueWorker(Worker):
    """django-tasks' database worker, telling the heartbeat which task it runs."""

    def __init__(self, *, running: _Running, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._running = running

    def run_task(self, db_task_result: DBTaskResult[Any, Any]) -> None:
        args = tuple(db_task_result.args_kwargs.get("args") or ())
        item = InFlight(str(db_task_result.id), db_task_result.task_path, args)
        self._running.add(item)
        try:
            super().run_task(db_task_result)
        finally:
            self._running.remove(item.task_id)


class Command(BaseCommand):
    help = "Run a background task worker that also enqueues due periodic tasks."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--queues", type=queue_spec, default=queue_spec(DEFAULT_QUEUES),
            help="The queues to serve, each with its number of threads: name[:threads],... "
                 f"(default {DEFAULT_QUEUES}; the queues are {', '.join(QUEUES)}).",
        )  # fmt: skip
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
        parser.add_argument(
            "--batch", action="store_true", help="Run the ready tasks of the queues, then exit."
        )
        parser.add_argument("--worker-id", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        # The database worker logs every pass over the queue at INFO: kept for -v 2.
        quiet = logging.INFO if options["verbosity"] > 1 else logging.WARNING
        for name in ("django_tasks_db", "django_tasks", "django.tasks"):
            logging.getLogger(name).setLevel(quiet)
        queues: list[tuple[str, int]] = options["queues"]
        worker_id = options["worker_id"] or default_worker_id()
        running = _Running()

        def worker(names: list[str]) -> _QueueWorker:
            return _QueueWorker(
                running=running, queue_names=names, interval=0, batch=True,
                backend_name="default", startup_delay=False, max_tasks=None,
                worker_id=worker_id, excluded_queue_names=[],
            )  # fmt: skip

        stop = threading.Event()
        outage = _Outage()
        housekeeping = threading.Thread(
            target=_housekeep,
            args=(stop, outage, worker_id, [name for name, _ in queues], running, options),
            name="housekeeping",
            daemon=True,
        )
        if options["batch"]:
            # The lease is kept in batch mode too: a long task must not be reclaimed.
            housekeeping.start()
            try:
                worker([name for name, _ in queues]).run()
            finally:
                stop.set()
                housekeeping.join()
                task_worker_forget(worker_id=worker_id)
            return

        wakes: list[threading.Event] = []
        workers: list[_QueueWorker] = []
        threads = [housekeeping]
        for name, count in queues:
            for n in range(count):
                wake, queue_worker = threading.Event(), worker([name])
                wakes.append(wake)
                workers.append(queue_worker)
                threads.append(
                    threading.Thread(
                        target=_serve,
                        args=(queue_worker, name, wake, stop, outage, options["interval"]),
                        name=f"{name}-{n}",
                        daemon=True,
                    )
                )

        def shutdown(signum: int, frame: FrameType | None) -> None:
            if stop.is_set():
                logger.warning("%s again: exiting now", signal.strsignal(signum))
                raise SystemExit(1)
            logger.warning(
                "%s: finishing the running tasks, then exiting", signal.strsignal(signum)
            )
            stop.set()
            for queue_worker in workers:
                queue_worker.running = False  # ends its loop after the task it is running
            for wake in wakes:
                wake.set()

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
            signal.signal(signum, shutdown)
        for thread in threads:
            thread.start()
        waiter = _Waiter()
        try:
            while not stop.is_set():
                waiter.wait(options["interval"])
                for wake in wakes:
                    wake.set()
            for thread in threads:
                thread.join()
        finally:
            stop.set()
            waiter.close()
            try:
                task_worker_forget(worker_id=worker_id)
            except DatabaseError:
                logger.warning("could not give up the lease; it runs out by itself")


def _serve(
    worker: _QueueWorker,
    queue: str,
    wake: threading.Event,
    stop: threading.Event,
    outage: _Outage,
    interval: float,
) -> None:
    """One thread of one queue: run its ready tasks, wait for a wake-up, again."""
    while not stop.is_set():
        wake.clear()  # a wake-up arriving while the batch runs is kept for the next wait
        try:
            worker.run()
            outage.ok()
        except DatabaseError as failure:
            outage.failed(f"queue {queue}", failure, stop)
            continue
        except Exception:
            logger.exception("queue %s: the worker failed; carrying on", queue)
            stop.wait(interval)
            continue
        wake.wait(interval)
    connection.close()


def _housekeep(
    stop: threading.Event,
    outage: _Outage,
    worker_id: str,
    queues: list[str],
    running: _Running,
    options: dict[str, Any],
) -> None:
    """Renew the lease every third of a lease; enqueue the due periodic tasks every tick."""
    beat_every = settings.TASK_WORKER_LEASE_SECONDS / 3
    tick = options["tick"]
    schedule = not options["no_periodic"] and not options["batch"]
    next_beat = next_tick = 0.0
    ticks = 0
    while not stop.is_set():
        now = time.monotonic()
        try:
            close_old_connections()
            if now >= next_beat:
                task_worker_beat(worker_id=worker_id, queues=queues, running=running.snapshot())
                next_beat = now + beat_every
            if schedule and now >= next_tick:
                enqueue_due()
                ticks += 1
                if ticks % 720 == 1:
                    forget_old_slots()
                next_tick = now + tick
            outage.ok()
        except DatabaseError as failure:
            outage.failed("housekeeping", failure, stop)
            continue
        except Exception:
            logger.exception("housekeeping failed; trying again")
            stop.wait(tick)
            continue
        due = min(next_beat, next_tick) if schedule else next_beat
        stop.wait(max(0.05, due - time.monotonic()))
    connection.close()


class _Waiter:
    """Waits for a NOTIFY on a connection of its own (PostgreSQL), else just sleeps; a lost
    connection (the database restarted) is opened again at most every few seconds."""

    RETRY_SECONDS = 5.0

    def __init__(self) -> None:
        self._wrapper: Any = None
        self._next_try = 0.0
        self._open()

    def _open(self) -> None:
        if connection.vendor != "postgresql" or time.monotonic() < self._next_try:
            return
        try:
            self._wrapper = connections.create_connection("default")
            self._wrapper.ensure_connection()
            self._wrapper.connection.autocommit = True
            self._wrapper.connection.execute(f"LISTEN {WAKE_CHANNEL}")
        except DatabaseError as failure:
            detail = " ".join(str(failure).split())[:300]
            logger.warning("LISTEN unavailable (%s); polling the queues meanwhile", detail)
            self.close()
            self._next_try = time.monotonic() + self.RETRY_SECONDS

    def wait(self, seconds: float) -> None:
        if self._wrapper is None:
            self._open()
        if self._wrapper is None:
            time.sleep(seconds)
            return
        try:
            for _ in self._wrapper.connection.notifies(timeout=seconds, stop_after=1):
                pass
        except Exception as failure:  # psycopg's own errors, outside Django's wrapping
            detail = " ".join(str(failure).split())[:300]
            logger.warning("the LISTEN connection failed (%s); reconnecting", detail)
            self.close()
            time.sleep(seconds)

    def close(self) -> None:
        if self._wrapper is not None:
            try:
                self._wrapper.close()
            except Exception:
                logger.debug("closing the LISTEN connection failed", exc_info=True)
            self._wrapper = None
