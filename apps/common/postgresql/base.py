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
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg.pq import ConnStatus


class DatabaseWrapper(base.DatabaseWrapper):
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
