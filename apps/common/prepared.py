"""Prepared statements and pipelined transactions for the receipt push path (PostgreSQL).

Django's psycopg cursors bind parameters client-side, so PostgreSQL parses and plans each
statement on every execution; for the push path's statements (row-level security policies
included) planning costs more than running them. A cursor from :func:`prepared_cursor`
binds server-side: a statement executed with ``prepare=True`` is prepared once per
connection and afterwards only bound and executed.

:func:`pipelined_transaction` goes further for a short transaction: it sends its
statements in psycopg's pipeline mode, so BEGIN travels with the first statements and
COMMIT with the last ones. A lock-read-write transaction then costs two round trips to
the database instead of five (BEGIN, lock, read, write, COMMIT each waiting for the
answer), and the lock is held for one round trip plus the Python between them.

Both work on Django's own connection: the same session (org context), Django's health
check first, database errors translated to Django's (a lost database is still answered
503). Django switches psycopg's statement preparation off for transaction-mode connection
poolers; this service cannot sit behind one anyway (its org context is session state, see
``apps.tenancy.org_context``), and Django's own cursors bind client-side and never
prepare, so switching it back on here affects only these statements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection
from psycopg.pq import TransactionStatus

PreparedCursor = psycopg.Cursor[tuple[Any, ...]]

# Statements are prepared when executed with ``prepare=True``, never by count.
_PREPARE_ON_REQUEST_ONLY = 2**31


def _raw_connection() -> psycopg.Connection[Any]:
    assert connection.vendor == "postgresql", "prepared statements are PostgreSQL's"
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw: psycopg.Connection[Any] = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = _PREPARE_ON_REQUEST_ONLY
    return raw


@contextmanager
def prepared_cursors() -> Iterator[Callable[[], PreparedCursor]]:
    """A factory of server-side-binding cursors, whose ``execute(..., prepare=True)``
    reuses plans, in whatever transaction Django's connection is in."""
    raw = _raw_connection()
    with connection.wrap_database_errors:
        yield lambda: psycopg.Cursor(raw)


@contextmanager
def prepared_cursor() -> Iterator[PreparedCursor]:
    """One cursor of :func:`prepared_cursors`."""
    with prepared_cursors() as new_cursor, new_cursor() as cursor:
        yield cursor


def can_pipeline() -> bool:
    """A pipelined transaction needs PostgreSQL, a libpq with pipeline mode, and no
    transaction of Django's already open (inside one, use savepoints: ``atomic``)."""
    return (
        connection.vendor == "postgresql"
        and not connection.in_atomic_block
        and psycopg.Pipeline.is_supported()
    )


@contextmanager
def pipelined_transaction() -> Iterator[Callable[[], PreparedCursor]]:
    """One transaction whose statements are pipelined; yields a factory of prepared-cursor.

    Fetching a result waits for everything sent so far: one round trip for all of it.
    The transaction commits when the block ends (COMMIT goes out with the last
    statements) and rolls back if it raises. Use a cursor per statement whose result is
    read after a later statement was sent. Only outside Django's transactions
    (:func:`can_pipeline`): Django still sees an autocommit connection.
    """
    raw = _raw_connection()
    with connection.wrap_database_errors:
        try:
            with raw.pipeline():
                raw.execute("BEGIN")
                yield lambda: psycopg.Cursor(raw)
                raw.execute("COMMIT")
        finally:
            # After a refusal or an error the transaction is still open (or failed):
            # nothing it did may stay. A ROLLBACK statement rather than rollback(), which
            # would also drop every prepared statement (they survive a rollback).
            if raw.info.transaction_status != TransactionStatus.IDLE:
                raw.execute("ROLLBACK")
