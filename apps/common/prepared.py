"""Prepared statements and pipelined transactions for the receipt push path (PostgreSQL).

Django's psycopg cursors bind parameters client-side, so PostgreSQL parses and plans each
statement on every execution; for the push path's statements (row-level security policies
included) planning costs more than running them. A cursor from :func:`prepared_cursors`
binds server-side: a statement executed with ``prepare=True`` is prepared once per
connection and afterwards only bound and executed.

:func:`pipelined_transaction` goes further for a short transaction: it sends its
statements in psycopg's pipeline mode, in the pipeline's implicit transaction (no BEGIN,
no COMMIT: the Sync that ends the pipeline commits). A lock-read-write transaction then
costs two round trips to the database instead of five (BEGIN, lock, read, write, COMMIT
each waiting for the answer) and three statements, and the lock is held for one round
trip plus the Python between them.

Both work on Django's own connection: the same session (org context), Django's health
check first, database errors translated to Django's (a lost database is still answered
503). :func:`fetchone_checked` spares a request that health check's round trip: the
request's first statement is the check (see there).

Django switches psycopg's statement preparation off for transaction-mode connection
poolers; this service cannot sit behind one anyway (its org context is session state, see
``apps.tenancy.org_context``), and Django's own cursors bind client-side and never
prepare, so switching it back on here affects only these statements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from django.db import connection

PreparedCursor = psycopg.Cursor[tuple[Any, ...]]

# Statements are prepared when executed with ``prepare=True``, never by count.
_PREPARE_ON_REQUEST_ONLY = 2**31


def _raw_connection() -> psycopg.Connection[Any]:
    assert connection.vendor == "postgresql", "prepared statements are PostgreSQL's"
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    return _prepared(connection.connection)


def _prepared(raw: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    if raw.prepare_threshold is None:
        raw.prepare_threshold = _PREPARE_ON_REQUEST_ONLY
    return raw


def fetchone_checked(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    """The first row of a prepared statement that may stand in for Django's health check.

    With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` before a request's first
    statement on a persistent connection, a round trip of its own. Here, when that check
    is still due, the statement itself checks the connection: if it fails on a connection
    found broken (the server restarted, the connection was cut), Django's connection is
    closed and the statement runs once more on a new one; if it succeeds, the check is
    done for the rest of the request. Only for statements that may run twice: reads, and
    session settings that the retry sets again.
    """
    django: Any = connection  # its health-check attributes are not in django-stubs
    raw = connection.connection
    if raw is not None and django.health_check_enabled and not django.health_check_done:
        try:
            return _fetchone(_prepared(raw), sql, params)
        except psycopg.Error:
            if not (raw.closed or raw.broken):
                with connection.wrap_database_errors:
                    raise
            connection.close()  # dead: the statement is retried on a new connection
        finally:
            if connection.connection is raw:
                django.health_check_done = True
    with connection.wrap_database_errors:
        return _fetchone(_raw_connection(), sql, params)


def _fetchone(raw: psycopg.Connection[Any], sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    with psycopg.Cursor(raw) as cursor:
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()


@contextmanager
def prepared_cursors() -> Iterator[Callable[[], PreparedCursor]]:
    """A factory of server-side-binding cursors, whose ``execute(..., prepare=True)``
    reuses plans, in whatever transaction Django's connection is in."""
    raw = _raw_connection()
    with connection.wrap_database_errors:
        yield lambda: psycopg.Cursor(raw)


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
    """One transaction whose statements are pipelined; yields a factory of prepared cursors.

    Fetching a result waits for everything sent so far: one round trip for all of it.
    The transaction is the pipeline's *implicit* one: PostgreSQL runs every statement up
    to the pipeline's Sync (sent when the block ends) in one transaction, committed at the
    Sync, or rolled back there if a statement failed. So no BEGIN or COMMIT is sent (two
    statements fewer on the push path); locks taken are held until the block ends, across
    the fetches (psycopg asks for results with a flush request, which ends nothing). If
    the block raises, a ROLLBACK goes out first: psycopg sends the Sync even then, and it
    must not commit what was sent before the error. Use a cursor per statement whose
    result is read after a later statement was sent. Only outside Django's transactions
    (:func:`can_pipeline`): Django still sees an autocommit connection.
    """
    raw = _raw_connection()
    with connection.wrap_database_errors, raw.pipeline():
        try:
            yield lambda: psycopg.Cursor(raw)
        except BaseException:
            _roll_back_in_pipeline(raw)
            raise


def _roll_back_in_pipeline(raw: psycopg.Connection[Any]) -> None:
    """End the pipeline's implicit transaction without committing it. PostgreSQL answers a
    ROLLBACK there with the warning "there is no transaction in progress" and rolls the
    implicit transaction back all the same (psycopg drops notices: no handler is set).
    After a failed statement the pipeline is aborted and refuses the ROLLBACK: its Sync
    rolls back anyway."""
    with suppress(psycopg.Error):
        raw.execute("ROLLBACK")
