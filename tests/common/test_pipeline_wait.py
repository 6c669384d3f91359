"""A database server that stops answering in the middle of the append's pipeline (a frozen
host, a network partition: the connection stays open, nothing comes back) does not hold
the worker: past ``DB_PIPELINE_WAIT_MS`` the connection is closed and the push answered
503 as for a database that is down; nothing is half-written and the next push succeeds.

The server is real: PostgreSQL behind a TCP relay on 127.0.0.1 that stops forwarding its
answers on demand."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest
from django.db import close_old_connections, connection
from rest_framework.test import APIClient

from apps.receipts import append_sql
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from tests.common.test_prepared import libpq_pipeline  # noqa: F401 (a fixture)
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

# How long a paused relay holds the server's answers before it forwards them after all:
# far beyond the bound under test, so that a worker that waits unbounded gets its answer
# (and the test its wrong status) instead of hanging the suite.
HELD_SECONDS = 10.0


class Relay:
    """Forwards TCP connections from a port on 127.0.0.1 to the database server; while
    paused, holds back what the server sends."""

    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._answering = threading.Event()
        self._answering.set()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        self._answering.clear()
        timer = threading.Timer(HELD_SECONDS, self._answering.set)
        timer.daemon = True  # never holds the test run's exit
        timer.start()

    def resume(self) -> None:
        self._answering.set()

    def close(self) -> None:
        self.resume()
        for sock in [self._listener, *self._sockets]:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, held: bool) -> None:
        try:
            while data := source.recv(65536):
                if held:
                    self._answering.wait()
                target.sendall(data)
        except OSError:
            pass
        for sock in (source, target):
            sock.close()


@pytest.fixture
def relay(cast: Any) -> Iterator[Relay]:
    """This worker's database connection, through the relay."""
    settings_dict = connection.settings_dict
    real = (settings_dict["HOST"], settings_dict["PORT"])
    through = Relay(real[0] or "127.0.0.1", int(real[1] or 5432))
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(through.port)
    try:
        yield through
    finally:
        settings_dict["HOST"], settings_dict["PORT"] = real
        connection.close()
        through.close()


@pytest.mark.usefixtures("libpq_pipeline")
def test_a_server_that_stops_answering_mid_pipeline_is_answered_503(
    cast, relay, settings, monkeypatch
) -> None:
    settings.DB_PIPELINE_WAIT_MS = 500
    push = Pusher(APIClient(), cast.acme_key.secret)
    agent = Agent()
    close_old_connections()
    assert push(agent.receipt()).status_code == HTTPStatus.CREATED
    through_relay = connection.connection

    real = append_sql.AppendStatements.lock_and_read

    def stops_answering(self: Any, **keys: Any) -> Any:
        relay.pause()  # the lock and the read reach the server; no answer comes back
        return real(self, **keys)

    monkeypatch.setattr(append_sql.AppendStatements, "lock_and_read", stops_answering)
    close_old_connections()
    response = push(agent.receipt())
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE, response.content
    assert response["Retry-After"]
    assert connection.connection is None or connection.connection is not through_relay

    monkeypatch.undo()
    relay.resume()
    close_old_connections()
    response = push(agent.receipt())
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["seq"] == 2
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 2
    assert mirror_chain_check(org=cast.acme).ok
