"""A real webhook receiver on 127.0.0.1 that verifies every signature with
``standardwebhooks``, and a worker run in-process (django-tasks' database worker)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection
from django.utils.crypto import get_random_string
from django_tasks_db.management.commands.db_worker import Worker
from standardwebhooks import Webhook, WebhookVerificationError

from apps.events.subscriptions import forget_subscribers


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified_with: list[str]  # the secrets whose signature verified
    path: str = ""  # the request target, as it arrived

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    """Answers each request with the next planned reaction (an HTTP status, or
    ``("hang", seconds)``), then 200 once the plan is used up."""

    url: str = ""
    secrets: list[str] = field(default_factory=list)
    plan: list[Any] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    unverified: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, headers: dict[str, str], body: bytes, path: str = "") -> Any:
        verified = []
        for secret in self.secrets:
            try:
                Webhook(secret).verify(body, headers)
                verified.append(secret)
            except WebhookVerificationError:
                pass
        item = Received(headers, body, verified, path)
        with self.lock:
            (self.received if verified else self.unverified).append(item)
            return self.plan.pop(0) if self.plan else 200

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        return list(self.received)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            reaction = state.record(headers, body, self.path)
            if isinstance(reaction, tuple) and reaction[0] == "hang":
                time.sleep(reaction[1])
                reaction = 200
            if isinstance(reaction, tuple) and reaction[0] == "redirect":
                self.send_response(302)
                self.send_header("Location", reaction[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = b"ok" if reaction < 400 else b"nope"
            try:
                self.send_response(reaction)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the sender gave up (timeout)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _fresh_subscribers() -> Iterator[None]:
    forget_subscribers()
    yield
    forget_subscribers()


def work(until: Callable[[], bool] = lambda: False, *, timeout: float = 30.0) -> None:
    """Run the queue's ready tasks in this thread (a database worker in batch mode), again
    and again, until ``until()`` holds or the queue stays empty past ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        Worker(
            queue_names=["*"], interval=0, batch=True, backend_name="default",
            startup_delay=False, max_tasks=None, worker_id=get_random_string(16),
            excluded_queue_names=[],
        ).run()  # fmt: skip
        if until() or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def worker_thread(stop: threading.Event, worker_id: str) -> threading.Thread:
    """A worker with its own database connection, polling until ``stop``."""

    def run() -> None:
        try:
            while not stop.is_set():
                Worker(
                    queue_names=["*"], interval=0, batch=True, backend_name="default",
                    startup_delay=False, max_tasks=None, worker_id=worker_id,
                    excluded_queue_names=[],
                ).run()  # fmt: skip
                time.sleep(0.01)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name=worker_id, daemon=True)
    thread.start()
    return thread


def fan_out() -> None:
    """Make every recorded event's deliveries now (the fan-out task's function, without a
    worker: for tests that look at deliveries rather than send them)."""
    from apps.events.models import Event
    from apps.events.services import event_fan_out

    for event in Event.objects.order_by("id"):
        event_fan_out(event=event)
