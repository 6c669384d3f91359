"""One attempt is bounded as a whole: a receiver that trickles its answer a byte at a time
(each read well within the timeout) is cut off at the attempt's deadline, and the attempt
is a failed one, retried like any other."""

from __future__ import annotations

import contextlib
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from apps.events.destinations import post
from apps.events.models import Delivery, WebhookEndpoint
from apps.events.services import webhook_endpoint_create
from apps.policy.services import policy_deploy
from tests.events.conftest import work
from tests.policy.test_policy_api import rule_toml

TRICKLED_BYTES = 40
TRICKLE_INTERVAL = 0.5  # so the whole answer takes 20 s, each byte well within the timeout
TRICKLE_SECONDS = TRICKLED_BYTES * TRICKLE_INTERVAL


class _Trickle(socketserver.StreamRequestHandler):
    """Reads the request, then answers 200 with either its header section or its body
    sent one byte every TRICKLE_INTERVAL seconds."""

    mode = "body"

    def handle(self) -> None:
        length = 0
        while (line := self.rfile.readline(65_537)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        self.rfile.read(length)
        if self.mode == "headers":
            head, slow = b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a" * TRICKLED_BYTES
            tail = b"\r\nContent-Length: 2\r\n\r\nok"
        else:
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {TRICKLED_BYTES}\r\n\r\n".encode()
            slow, tail = b"a" * TRICKLED_BYTES, b""
        with contextlib.suppress(OSError):  # the sender gave up
            self.wfile.write(head)
            for byte in slow:
                time.sleep(TRICKLE_INTERVAL)
                self.wfile.write(bytes([byte]))
            self.wfile.write(tail)


@contextlib.contextmanager
def trickling_receiver(mode: str) -> Iterator[str]:
    handler = type("Handler", (_Trickle,), {"mode": mode})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()
        server.server_close()


def test_a_body_trickled_a_byte_at_a_time_is_cut_off_at_the_deadline(settings) -> None:
    settings.WEBHOOK_TIMEOUT_SECONDS = 2
    with trickling_receiver("body") as url:
        started = time.monotonic()
        result = post(url, b"{}", {})
        took = time.monotonic() - started

    assert (result.status, result.error) == (None, "timed out after 2 s")
    assert not result.ok
    assert took < TRICKLE_SECONDS / 2  # ended near the deadline, not when the trickle did


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_headers_trickled_a_byte_at_a_time_make_a_failed_attempt_that_is_retried(
    cast, settings
) -> None:
    settings.WEBHOOK_TIMEOUT_SECONDS = 2
    with trickling_receiver("headers") as url:
        endpoint = webhook_endpoint_create(org=cast.acme, url=url, event_types=["policy.deployed"])
        policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))
        started = time.monotonic()
        work(lambda: Delivery.objects.filter(attempts__gte=1).exists(), timeout=60)
        took = time.monotonic() - started

    delivery = Delivery.objects.get(endpoint=endpoint)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error == "timed out after 2 s"
    assert delivery.next_attempt_at > delivery.last_attempt_at
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).consecutive_failures == 1
    assert took < TRICKLE_SECONDS / 2
