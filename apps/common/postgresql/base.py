"""Django's PostgreSQL backend, with a per-request health check that costs no round trip.

With ``CONN_HEALTH_CHECKS`` Django checks a persistent connection before a request first
uses it, by sending ``SELECT 1`` and waiting for the answer: on the receipt push path that
round trip was about a twentieth of the push's CPU, client and server together. A
connection the server has ended (a restart, ``pg_terminate_backend``, a proxy's idle
timeout) has already said so on its socket: the server's FATAL message, then the end of
the stream. So the check here looks at the socket without waiting (``poll`` with no
timeout): a connection that was sent anything while idle is found unusable and Django
opens a new one, as with ``SELECT 1``.

What neither check can see at once is a peer that vanished without a word (a cable pulled
between two hosts): ``SELECT 1`` would wait for the kernel's retransmission timeout there;
here the request's first statement does. Either way that request fails (503) and the
connection is replaced.

That first statement may also stand in for the check itself
(:meth:`DatabaseWrapper.run_as_health_check`): the push path's first statement (the API
key resolver, the org context) is its check, and no ``SELECT 1`` round trip is sent.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import TypeVar

import psycopg
from django.db.backends.postgresql import base
from psycopg.pq import ConnStatus

T = TypeVar("T")


class DatabaseWrapper(base.DatabaseWrapper):
    # Django's, set per connection (not in django-stubs).
    health_check_enabled: bool
    health_check_done: bool

    def run_as_health_check(self, statement: Callable[[], T]) -> T:
        """Run ``statement`` (one that may run twice: a read, a session setting), standing
        in for the health check when it is still due.

        With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` before a request's first
        statement on a persistent connection, a round trip of its own. Here, when that
        check is due, the statement itself checks the connection: if it fails on a
        connection found broken (the server restarted, the connection was cut, or it stopped
        answering), the connection is closed and the statement runs once more on a new one;
        if it succeeds, the check is done for the rest of the request. Errors are Django's.
        """
        raw = self.connection
        if raw is not None and self.health_check_enabled and not self.health_check_done:
            try:
                return statement()
            except psycopg.Error:
                if not (raw.closed or raw.broken):
                    with self.wrap_database_errors:
                        raise
                self.close()  # dead: the statement is retried on a new connection
            finally:
                if self.connection is raw:
                    self.health_check_done = True
        with self.wrap_database_errors:
            return statement()

    def is_usable(self) -> bool:
        raw: psycopg.Connection[object] | None = self.connection
        if raw is None or raw.closed or raw.broken:
            return False
        pgconn = raw.pgconn
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN)
            # An idle connection is sent nothing unasked but its end (the server's FATAL
            # message, then the end of the stream, which may lag a moment behind it) or,
            # rarely, a notice: anything waiting means a new connection, at the cost of a
            # reconnect for the rare notice.
            if poller.poll(0):
                return False
        except (psycopg.Error, OSError, ValueError):
            return False
        return bool(pgconn.status == ConnStatus.OK)
