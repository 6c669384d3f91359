"""The task worker under faults, with real ``manage.py run_worker`` processes: a slow
webhook receiver does not hold up periodic work, the tasks of a SIGKILLed worker run
again (and an export it was building is rebuilt or failed with a reason), the worker
waits out a database outage instead of exiting, and schedulers racing for a periodic
slot leave no error in the database server."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone
from django_tasks.base import Task
from django_tasks_db.models import DBTaskResult

from apps.approvals.models import Approval
from apps.approvals.services import approval_open
from apps.approvals.tasks import sweep_approvals
from apps.audit.exports import build_evidence_export
from apps.audit.models import EvidenceExportJob
from apps.common import tasks
from apps.common.models import PeriodicSlot, TaskWorker
from apps.common.scheduling import enqueue_due, schedule
from apps.common.workers import prune_task_results
from apps.events.delivery import deliver_webhook
from apps.events.models import Delivery, DeliveryStatus, Event
from apps.events.services import fan_out_event, webhook_endpoint_create
from apps.events.tasks import sweep_deliveries
from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorHead
from tests.approvals.conftest import suspended_receipt
from tests.approvals.test_approval_flows import SCOPE
from tests.events.conftest import Receiver
from tests.policy.test_policy_api import rule_toml
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
POLICY = rule_toml("search.allow", "tool_call", "allow")
LEASE = 2  # seconds: TASK_WORKER_LEASE_SECONDS of the workers started here


def eventually(condition: Callable[[], Any], *, timeout: float = 60.0) -> Any:
    """Poll ``condition`` until it is truthy (its value) or ``timeout`` (then falsy)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def _database_url(port: int | None = None) -> str:
    settings_dict = connection.settings_dict
    return (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:"
        f"{port or settings_dict['PORT']}/{settings_dict['NAME']}"
    )


class Workers:
    """``manage.py run_worker`` subprocesses on the test database, stopped at the end."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[subprocess.Popen[bytes]] = []

    def start(
        self, worker_id: str, *args: str, database_url: str = "", **extra: str
    ) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "DATABASE_URL": database_url or _database_url(),
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "TASK_WORKER_LEASE_SECONDS": str(LEASE),
            **extra,
        }
        log = (self.logs / f"{worker_id}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "manage.py", "run_worker", f"--worker-id={worker_id}", "--tick=0.2",
             *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.started.append(process)
        return process

    def log(self, worker_id: str) -> str:
        return (self.logs / f"{worker_id}.log").read_text(errors="replace")

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.terminate()
        for process in self.started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    started = Workers(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def _task(work: Task[Any, Any], **filters: Any) -> DBTaskResult | None:
    """The first enqueued task of ``work`` (a retry is a later one)."""
    tasks_of = DBTaskResult.objects.filter(task_path=work.module_path, **filters)
    return tasks_of.order_by("enqueued_at", "id").first()


class _HeldReceiver:
    """A webhook receiver that holds every request open until ``release`` is set: it
    trickles header lines meanwhile, so the sender keeps reading (its attempt is in
    flight, not timed out, for as long as the test wants)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.arrived = threading.Event()
        self.arrivals: list[tuple[str, Any]] = []  # (webhook-id, when)
        held = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                held.arrivals.append((self.headers.get("webhook-id", ""), timezone.now()))
                held.arrived.set()
                try:
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    while not held.release.wait(0.3):
                        self.wfile.write(b"X-Still-Here: 1\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"Content-Length: 2\r\nConnection: close\r\n\r\nok")
                except OSError:
                    pass  # the sender gave up

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def held_receiver() -> Iterator[_HeldReceiver]:
    receiver = _HeldReceiver()
    try:
        yield receiver
    finally:
        receiver.close()


def test_a_slow_webhook_receiver_does_not_hold_up_approval_expiry(
    cast, workers, held_receiver
) -> None:
    webhook_endpoint_create(org=cast.acme, url=held_receiver.url, event_types=["policy.deployed"])
    # Another org's approval is overdue; its expiry must run while acme's attempt is held.
    content = suspended_receipt(Agent())["content"]
    approval_open(org=cast.globex, action_hash=content["action_hash"], rule_id=SCOPE,
                  expires_at=timezone.now() - timedelta(seconds=1))  # fmt: skip
    workers.start("w-slow", "--no-periodic")
    policy_deploy(org=cast.acme, toml=POLICY)
    assert held_receiver.arrived.wait(60), workers.log("w-slow")

    tasks.enqueue(sweep_approvals)
    expired = eventually(lambda: Approval.objects.filter(status="expired").exists())
    attempt = _task(deliver_webhook)
    assert attempt is not None

    assert expired, workers.log("w-slow")
    assert attempt.status == "RUNNING"  # the webhook attempt was still in flight
    held_receiver.release.set()
    assert eventually(lambda: _task(deliver_webhook, finished_at__isnull=False))


def test_a_delivery_claim_is_extended_while_its_worker_is_on_it(
    cast, workers, held_receiver
) -> None:
    webhook_endpoint_create(org=cast.acme, url=held_receiver.url, event_types=["policy.deployed"])
    workers.start("w-claim", "--no-periodic", TASK_WORKER_LEASE_SECONDS="1")
    policy_deploy(org=cast.acme, toml=POLICY)
    assert held_receiver.arrived.wait(60), workers.log("w-claim")
    # The attempt has outlasted its first hold (as a slow receiver's would).
    expired_at = timezone.now() - timedelta(seconds=1)
    Delivery.objects.update(claimed_until=expired_at)

    extended = eventually(
        lambda: Delivery.objects.filter(claimed_until__gt=timezone.now()).exists(), timeout=30
    )

    assert extended, workers.log("w-claim")
    assert Delivery.objects.get().status == DeliveryStatus.SENDING
    # So the sweep does not hand it to another worker, and no second attempt can claim it.
    assert sweep_deliveries.call() == 0
    from apps.events.delivery import delivery_attempt

    assert delivery_attempt(Delivery.objects.get().pk) == "not due"
    held_receiver.release.set()
    assert eventually(lambda: Delivery.objects.exclude(status=DeliveryStatus.SENDING).exists())
    assert Delivery.objects.get().attempts == 1  # one attempt, by the worker that claimed it


def _lock_table(table: str, mode: str) -> Any:
    """Another session holding ``LOCK TABLE``: statements that need the table wait."""
    holder = connections.create_connection("default")
    holder.ensure_connection()
    holder.connection.autocommit = False
    holder.connection.execute(f"LOCK TABLE {table} IN {mode} MODE")
    return holder


def _kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def test_the_fan_out_of_a_killed_worker_runs_again_and_delivers_the_event_once(
    cast, workers, receiver: Receiver
) -> None:
    endpoint = webhook_endpoint_create(
        org=cast.acme, url=receiver.url, event_types=["policy.deployed"]
    )
    receiver.secrets.append(endpoint.secret)
    # The fan-out's insert of the delivery waits behind this lock: the worker is killed
    # in the middle of the task.
    holder = _lock_table(Delivery._meta.db_table, "EXCLUSIVE")
    try:
        first = workers.start("w-first", "--no-periodic")
        policy_deploy(org=cast.acme, toml=POLICY)
        running = eventually(lambda: _task(fan_out_event, status="RUNNING"))
        assert running is not None, workers.log("w-first")
        _kill(first)
    finally:
        holder.connection.rollback()
        holder.close()

    workers.start("w-second")
    [received] = receiver.wait_for(1, timeout=60)

    event = Event.objects.get()
    assert received.webhook_id == event.event_id
    assert received.verified_with == [endpoint.secret]
    fan_out = _task(fan_out_event)
    assert fan_out is not None
    assert fan_out.status == "SUCCESSFUL"
    assert fan_out.worker_ids == ["w-first", "w-second"]
    assert eventually(lambda: Delivery.objects.filter(status="succeeded").count() == 1)
    assert receiver.wait_for(2, timeout=1) == [received]  # delivered once


def test_a_webhook_attempt_of_a_killed_worker_is_sent_again_with_the_same_webhook_id(
    cast, workers, held_receiver
) -> None:
    webhook_endpoint_create(org=cast.acme, url=held_receiver.url, event_types=["policy.deployed"])
    first = workers.start("w-sender", "--no-periodic")
    policy_deploy(org=cast.acme, toml=POLICY)
    assert held_receiver.arrived.wait(60), workers.log("w-sender")
    first_claim_until = Delivery.objects.get().claimed_until
    _kill(first)
    held_receiver.release.set()  # the next attempt is answered

    workers.start("w-resender")
    done = eventually(lambda: Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED).exists())

    assert done, workers.log("w-resender")
    event = Event.objects.get()
    assert [webhook_id for webhook_id, _ in held_receiver.arrivals] == [event.event_id] * 2
    # Sent again by the reclaim, not after the dead worker's claim had run out.
    assert held_receiver.arrivals[1][1] < first_claim_until
    delivery = Delivery.objects.get()
    assert delivery.attempts == 1  # the killed attempt recorded nothing
    attempt = _task(deliver_webhook)
    assert attempt is not None
    assert attempt.worker_ids == ["w-sender", "w-resender"]


def test_an_export_whose_worker_was_killed_is_built_again(
    cast, workers, dashboard, push, settings, tmp_path
) -> None:
    settings.MEDIA_ROOT = tmp_path
    for receipt in Agent().session("sess-export", 2):
        assert push(receipt).status_code == HTTPStatus.CREATED
    client = dashboard("auditor")
    # The build reads the chain head first; it waits behind this lock once running.
    holder = _lock_table(MirrorHead._meta.db_table, "ACCESS EXCLUSIVE")
    try:
        first = workers.start("w-export", "--no-periodic", MEDIA_ROOT=str(tmp_path))
        job = client.post("/v1/evidence/exports", {}, format="json").json()
        assert eventually(lambda: EvidenceExportJob.objects.filter(status="running").exists())
        _kill(first)
    finally:
        holder.connection.rollback()
        holder.close()
    assert client.get(job["url"] + "/download").status_code == HTTPStatus.CONFLICT

    second = workers.start("w-export-2", MEDIA_ROOT=str(tmp_path))
    ready = eventually(lambda: EvidenceExportJob.objects.filter(status="ready").exists())

    assert ready, workers.log("w-export-2")
    assert second.poll() is None
    state = client.get(job["url"]).json()
    assert state["status"] == "ready"
    download = client.get(state["download_url"])
    assert download.status_code == HTTPStatus.OK
    assert len(b"".join(download.streaming_content)) == state["size"]
    build = _task(build_evidence_export)
    assert build is not None
    assert build.worker_ids == ["w-export", "w-export-2"]


class _Proxy:
    """A TCP relay to PostgreSQL that can play an outage: while down, it accepts and at
    once closes every connection; ``cut()`` also drops the connections it is relaying."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = threading.Event()
        self.refused = 0
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up.is_set():
                with self._lock:
                    self.refused += 1
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 1.0)
                for source in readable:
                    data = source.recv(65536)
                    if not data:
                        return
                    (b if source is a else a).sendall(data)
        except OSError:
            return
        finally:
            a.close()
            b.close()

    def refusals(self) -> int:
        with self._lock:
            return self.refused

    def cut(self) -> None:
        self.up.clear()
        with self._lock:
            sockets, self._open = self._open, []
        for each in sockets:
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()

    def close(self) -> None:
        self.cut()
        self.listener.close()


def test_the_worker_waits_out_a_database_outage_and_carries_on(workers) -> None:
    settings_dict = connection.settings_dict
    proxy = _Proxy((settings_dict["HOST"], int(settings_dict["PORT"])))
    try:
        # Started while the database is unreachable: it must keep trying, not exit.
        process = workers.start("w-outage", database_url=_database_url(proxy.port))
        assert eventually(lambda: proxy.refusals() >= 3 or process.poll() is not None)
        assert process.poll() is None, workers.log("w-outage")

        proxy.up.set()
        tasks.enqueue(sweep_deliveries)
        done = eventually(lambda: _task(sweep_deliveries, status="SUCCESSFUL"))
        assert done is not None, workers.log("w-outage")
        assert done.worker_ids == ["w-outage"]

        # Then the database goes away under it (every backend gone) and comes back.
        refused = proxy.refusals()
        proxy.cut()
        assert eventually(lambda: proxy.refusals() >= refused + 2 or process.poll() is not None)
        assert process.poll() is None, workers.log("w-outage")
        proxy.up.set()
        tasks.enqueue(prune_task_results)
        again = eventually(lambda: _task(prune_task_results, status="SUCCESSFUL"))
        assert again is not None, workers.log("w-outage")
        assert again.worker_ids == ["w-outage"]
        # An outage is not a bug: one line per retry, no traceback.
        with_traceback = [line[:300] for line in workers.log("w-outage").splitlines()
                          if "Traceback" in line]  # fmt: skip
        assert with_traceback == []
    finally:
        proxy.close()


def test_schedulers_racing_for_a_slot_enqueue_it_once_without_a_database_error() -> None:
    errors: list[BaseException] = []
    won: list[list[str]] = []
    barrier = threading.Barrier(4)

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except Exception as failure:  # what the database server answered with an error
            errors.append(failure)
            raise

    def scheduler() -> None:
        try:
            with connection.execute_wrapper(record):
                barrier.wait()
                won.append(enqueue_due(now=2_000_000.0))
        finally:
            connection.close()

    threads = [threading.Thread(target=scheduler) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    scheduled = sorted(periodic.name for periodic in schedule() if periodic.every() > 0)
    assert sorted(name for names in won for name in names) == scheduled  # each once, in all
    assert PeriodicSlot.objects.count() == len(scheduled)
    assert DBTaskResult.objects.count() == len(scheduled)


def _left_running(task_id_of: Any, *, worker_ids: list[str], age: timedelta) -> DBTaskResult:
    """The task row as a worker that died mid-task leaves it."""
    row = DBTaskResult.objects.get(pk=task_id_of.id)
    row.status = "RUNNING"
    row.worker_ids = worker_ids
    row.started_at = timezone.now() - age
    row.save(update_fields=["status", "worker_ids", "started_at"])
    return row


def test_an_export_whose_workers_kept_dying_is_failed_with_the_reason(cast, dashboard) -> None:
    from apps.audit.evidence import EvidenceWindow
    from apps.audit.exports import evidence_export_request
    from apps.common.workers import tasks_reclaim

    job = evidence_export_request(org=cast.acme, window=EvidenceWindow(None, None))
    EvidenceExportJob.objects.filter(pk=job.pk).update(status="running")
    build = _left_running(
        _task(build_evidence_export), worker_ids=["w1", "w2", "w3"], age=timedelta(hours=1)
    )

    result = tasks_reclaim()

    assert result.failed == [str(build.id)]
    build.refresh_from_db()
    assert build.status == "FAILED"
    assert build.exception_class_path == "apps.common.workers.WorkerLost"
    client = dashboard("auditor")
    state = client.get(f"/v1/evidence/exports/{job.export_id}").json()
    assert state["status"] == "failed"
    assert "worker building it stopped" in state["error"]
    download = client.get(f"/v1/evidence/exports/{job.export_id}/download")
    assert download.status_code == HTTPStatus.CONFLICT
    assert download.json()["detail"] == "the export is failed, not ready"


def test_only_tasks_no_live_worker_is_running_are_reclaimed(cast) -> None:
    from apps.common.workers import tasks_reclaim

    for _ in range(3):
        tasks.enqueue(sweep_deliveries)
    long, dropped, fresh = DBTaskResult.objects.order_by("enqueued_at", "id")
    _left_running(long, worker_ids=["alive"], age=timedelta(hours=1))
    # Its worker is alive but no longer running it (it lost the row's update).
    _left_running(dropped, worker_ids=["alive"], age=timedelta(hours=1))
    _left_running(fresh, worker_ids=["gone"], age=timedelta(seconds=0))
    TaskWorker.objects.create(worker_id="alive", seen_at=timezone.now(), running=[str(long.id)])
    TaskWorker.objects.create(worker_id="gone", seen_at=timezone.now() - timedelta(days=2))

    result = tasks_reclaim()

    assert result.requeued == [str(dropped.id)]
    assert result.failed == []
    states = dict(DBTaskResult.objects.values_list("id", "status"))
    assert states == {long.id: "RUNNING", dropped.id: "READY", fresh.id: "RUNNING"}
    assert list(TaskWorker.objects.values_list("worker_id", flat=True)) == ["alive"]


def test_metrics_count_the_tasks_running_past_their_bound(db, api_client, settings) -> None:
    settings.METRICS_ENABLED = True
    settings.TASK_RUNNING_BOUND_SECONDS = 600
    tasks.enqueue(sweep_deliveries)
    tasks.enqueue(sweep_deliveries)
    stuck, busy = DBTaskResult.objects.order_by("enqueued_at", "id")
    _left_running(stuck, worker_ids=["w"], age=timedelta(hours=1))
    _left_running(busy, worker_ids=["w"], age=timedelta(seconds=5))

    text = api_client.get("/metrics").content.decode()

    assert "\nmirror_task_running 2\n" in text
    assert "\nmirror_task_running_over_bound 1\n" in text


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown queue 'nope'; the queues are default, periodic, deliveries"),
        ("deliveries:0", "'deliveries:0': between 1 and 64 threads"),
        ("deliveries:x", "'deliveries:x': the thread count must be a number"),
        ("default,default", "queue 'default' named twice"),
    ],
)
def test_the_worker_refuses_a_bad_queue_list(spec, message) -> None:
    import re

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=re.escape(f"--queues: {message}")):
        call_command("run_worker", "--batch", f"--queues={spec}")


def test_every_deployment_serves_every_queue() -> None:
    import re

    from apps.common.management.commands.run_worker import DEFAULT_QUEUES, queue_spec

    deploy = ROOT / "deploy"
    commands = {
        "make run": (ROOT / "Makefile", r"\$\(PY\) manage.py run_worker --queues ([\w:,]+)"),
        "systemd": (
            deploy / "mirror-worker.service",
            r"ExecStart=.* run_worker --queues ([\w:,]+)",
        ),
        "compose": (
            deploy / "compose.yaml",
            r'command: \[.*"run_worker", "--queues", "([\w:,]+)"\]',
        ),
    }
    for name, (path, pattern) in commands.items():
        [spec] = re.findall(pattern, path.read_text())
        assert {queue for queue, _ in queue_spec(spec)} == set(tasks.QUEUES), name
    assert {queue for queue, _ in queue_spec(DEFAULT_QUEUES)} == set(tasks.QUEUES)
    from django.conf import settings

    assert set(settings.TASKS["default"]["QUEUES"]) == set(tasks.QUEUES)
