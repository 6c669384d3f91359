"""Prepared statements and pipelined transactions for the receipt push path (PostgreSQL).

Django's psycopg cursors bind parameters client-side, so PostgreSQL parses and plans each
statement on every execution; for the push path's statements (row-level security policies
included) planning costs more than running them. The statements sent here are prepared
once per connection (named ``_mirror_N``) and afterwards only bound and executed.

:func:`pipelined_transaction` sends a short transaction's statements in libpq's pipeline
mode, in the pipeline's implicit transaction (no BEGIN, no COMMIT: the Sync that ends the
pipeline commits). A lock-read-write transaction then costs two round trips to the
database instead of five (BEGIN, lock, read, write, COMMIT each waiting for the answer)
and three statements, and the lock is held for one round trip plus the Python between
them. :func:`fetchone_checked` runs one statement the same way, and spares a request
Django's health-check round trip: the request's first statement is the check (the backend's
``run_as_health_check``, ``apps.common.postgresql``).

Both work on Django's own connection: the same session (org context), database errors
translated to Django's (a lost database is still answered 503). They speak libpq through
psycopg's binding (``pgconn``) and adapters (parameters dumped and rows loaded as
psycopg's cursors would): psycopg's own pipeline waits on the socket once per statement,
which costs the push measurable CPU (docs/performance/receipts.md). psycopg itself is told
never to prepare on these connections (Django's cursors bind client-side and never do):
after a rollback psycopg deallocates *every* prepared statement once it has prepared one
of its own. A transaction-mode pooler could not carry prepared statements, nor this
service's org context (session state, see ``apps.tenancy.org_context``).

``DB_APPEND_PIPELINE`` chooses how: ``libpq`` (the default) as above, or ``psycopg``:
psycopg's public API only (its ``Connection.pipeline()``, its cursors, which then prepare
the statements themselves), the fallback should a psycopg release change what ``libpq``
relies on (``pgconn``, ``Transformer``). Both modes keep the promises here (one round
trip a read, the commit at the end, the refusal of any other statement) but one: a server
that stops answering is given up on after ``DB_PIPELINE_WAIT_MS`` by the libpq mode only
(psycopg's waits, like those of all of Django's statements, have no bound of their own).
``psycopg`` costs more CPU a push and loses its prepared statements at each rollback.
Nothing outside this module knows which mode runs.
"""

from __future__ import annotations

import re
import select
import sys
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar, overload
from weakref import WeakKeyDictionary

import psycopg
from django.conf import settings
from django.db import connection
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer
from psycopg.errors import error_from_result
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGresult

PreparedCursor = psycopg.Cursor[Any]
Row = TypeVar("Row")
# What builds a row from its values: ``tuple``, or a named tuple's ``_make``.
MakeRow = Callable[[Sequence[Any]], Row]

LIBPQ = "libpq"
PSYCOPG = "psycopg"
# psycopg's preparation threshold in the psycopg mode: it prepares only when asked to
# (``execute(..., prepare=True)``), never on its own count of a statement's runs.
_ONLY_WHEN_ASKED = sys.maxsize
# The mode each open connection was last used in (see :func:`_raw_connection`).
_mode_by_connection: WeakKeyDictionary[Any, str] = WeakKeyDictionary()


def _mode() -> str:
    mode: str = settings.DB_APPEND_PIPELINE
    return mode


class StatementInPipeline(RuntimeError):
    """A statement other than a pipelined transaction's own was issued while its pipeline
    is open. A programming error, never a database outage: libpq refuses the statement
    ("PQsendQuery not allowed in pipeline mode"), which Django would report as an
    ``OperationalError`` and the service answer 503 on every retry. Work that is not the
    pipelined statements (events, audit rows, ORM reads and writes, a cache filled from
    the database) runs in a transaction of Django's instead, or after the pipeline."""


def _refuse_in_pipeline(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """Django execute wrapper installed while a pipeline is open (see above)."""
    raise StatementInPipeline(f"a statement was issued inside a pipelined transaction: {sql}")


def _raw_connection() -> psycopg.Connection[Any]:
    assert connection.vendor == "postgresql", "prepared statements are PostgreSQL's"
    raw_now: psycopg.Connection[Any] | None = connection.connection
    if raw_now is not None and raw_now.pgconn.pipeline_status != pq.PipelineStatus.OFF:
        raise StatementInPipeline("a statement was issued inside a pipelined transaction")
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw: psycopg.Connection[Any] = connection.connection
    mode = _mode()
    if _mode_by_connection.get(raw) != mode:
        _switch_mode(raw, mode)
    return raw


def _switch_mode(raw: psycopg.Connection[Any], mode: str) -> None:
    """Who prepares on ``raw``. In the libpq mode psycopg itself never prepares: every
    prepared statement is this module's. psycopg answers a rollback of its own with
    DEALLOCATE ALL whenever it has prepared anything, which would drop this module's
    statements behind its back. In the psycopg mode psycopg prepares, when asked. A
    process keeps one mode; a connection that served the other one (the tests switch
    the setting) first drops every prepared statement, through psycopg so that it
    forgets its own too."""
    if raw in _mode_by_connection:
        with connection.wrap_database_errors:
            raw.execute("DEALLOCATE ALL")
        _prepared_by_connection.pop(raw, None)
    raw.prepare_threshold = None if mode == LIBPQ else _ONLY_WHEN_ASKED
    _mode_by_connection[raw] = mode


@overload
def fetchone_checked(sql: str, params: list[Any]) -> tuple[Any, ...] | None: ...
@overload
def fetchone_checked(sql: str, params: list[Any], make_row: MakeRow[Row]) -> Row | None: ...
def fetchone_checked(sql: str, params: list[Any], make_row: MakeRow[Any] = tuple) -> Any:
    """The first row of a prepared statement that may stand in for Django's health check
    (``apps.common.postgresql``: when the check is due, a failure on a connection found
    broken runs the statement once more on a new one). Only for statements that may run
    twice: reads, and session settings that the retry sets again. Its row is built by
    ``make_row`` (a named tuple's ``_make``; a plain tuple by default)."""
    backend: Any = connection  # the PostgreSQL backend of apps.common.postgresql
    return backend.run_as_health_check(lambda: _fetchone(_raw_connection(), sql, params, make_row))


def _fetchone(
    raw: psycopg.Connection[Any], sql: str, params: list[Any], make_row: MakeRow[Row]
) -> Row | None:
    """One statement in a pipeline of its own: one round trip and about a cursor's CPU, and
    prepared by this module like every other statement on the connection. Inside a
    transaction of Django's it is part of it, unless it is the first statement there
    (psycopg opens the transaction with the next statement of its own): only for reads and
    session settings, whose effect is the same either way. Runs again, prepared anew, if
    the server no longer knows the prepared statement (a DISCARD ALL). In the psycopg
    mode, a psycopg cursor's statement, prepared by psycopg."""
    if _mode() == PSYCOPG:
        cursor = psycopg.Cursor(raw, row_factory=lambda _: make_row)
        return cursor.execute(sql, params, prepare=True).fetchone()
    for attempt in (1, 2):
        pipeline = _Pipeline(raw)
        pipeline.open()
        statement = pipeline.statement(make_row)
        statement.execute(sql, params)
        try:
            pipeline.close(commit=True)  # raises the statement's error; never a ROLLBACK
        except psycopg.errors.InvalidSqlStatementName:
            if attempt == 2 or raw.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                raise
            continue
        break
    return statement.fetchone()


@contextmanager
def prepared_cursors() -> Iterator[Callable[[], PreparedCursor]]:
    """A factory of server-side-binding cursors in whatever transaction Django's connection
    is in (the append inside a caller's ``atomic``: tests, a supersede). They do not
    prepare in the libpq mode (see :func:`_switch_mode`): PostgreSQL plans each statement."""
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


Statement = Any  # a PipelinedStatement, or a psycopg cursor in the psycopg mode


@contextmanager
def pipelined_transaction() -> Iterator[Callable[[], Statement]]:
    """One transaction whose statements are pipelined; yields a factory of statements, each
    of which takes one ``execute(sql, params, prepare=True)`` and whose rows are read with
    ``fetchone`` / ``fetchall``.

    Sending buffers; reading a result sends everything buffered so far and waits once for
    all of it: one round trip. The transaction is the pipeline's *implicit* one: PostgreSQL
    runs every statement up to the pipeline's Sync (sent when the block ends) in one
    transaction, committed at the Sync, or rolled back there if a statement failed. So no
    BEGIN or COMMIT is sent (two statements fewer on the push path); locks taken are held
    until the block ends, across the reads (results are asked for with a flush request,
    which ends nothing). If the block raises, a ROLLBACK goes out before the Sync: the Sync
    must not commit what was sent before the error. Use one statement object per statement
    whose rows are read after a later statement was sent. Only outside Django's
    transactions (:func:`can_pipeline`): Django still sees an autocommit connection.

    This speaks libpq's pipeline mode through psycopg's libpq binding (``pgconn``) and its
    adapters (parameters dumped and rows loaded exactly as psycopg's cursors would), not
    through psycopg's cursors: in pipeline mode those wait on the socket once per statement
    sent, which costs the push's three statements more CPU than one flush a round trip
    (docs/performance/receipts.md has the figures).

    Nothing else may use the connection until the block ends: any statement through
    Django's cursors or this module raises :class:`StatementInPipeline` (and the block
    rolls back). A server that stops answering in the middle is given
    ``DB_PIPELINE_WAIT_MS`` for each wait, then the connection is closed and the block
    raises ``OperationalError``, as for a database that is down.

    In the psycopg mode, psycopg's pipeline and cursors in a transaction of psycopg's
    (BEGIN and COMMIT travel in the pipeline: the same two round trips), whose waits are
    psycopg's own, as those of every other statement of Django's.
    """
    raw = _raw_connection()
    if _mode() == PSYCOPG:
        with (
            connection.wrap_database_errors,
            connection.execute_wrapper(_refuse_in_pipeline),
            raw.pipeline(),
            raw.transaction(),
        ):
            yield lambda: psycopg.Cursor(raw)
        return
    pipeline = _Pipeline(raw)
    with connection.wrap_database_errors, connection.execute_wrapper(_refuse_in_pipeline):
        pipeline.open()
        try:
            yield pipeline.statement
        except BaseException:
            pipeline.close(commit=False)
            raise
        pipeline.close(commit=True)


# Placeholders of the statements sent here: ``%s`` a parameter sent as text (PostgreSQL
# infers its type from the statement), ``%b`` one sent in binary (a ``text[]`` of receipt
# texts: copied, never escaped).
_PLACEHOLDER = re.compile("%[sb]")
# Prepared statements a connection keeps at most; older ones are deallocated (the append's
# statements are prepared anew as a connection's appends double: apps.receipts.append_sql).
_MAX_PREPARED = 32


@dataclass
class _Prepared:
    """One connection's statements prepared through :class:`_Pipeline`, by SQL text."""

    names: OrderedDict[str, bytes] = field(default_factory=OrderedDict)
    counter: int = 0


_prepared_by_connection: WeakKeyDictionary[Any, _Prepared] = WeakKeyDictionary()


@lru_cache(maxsize=256)
def _numbered(sql: str) -> tuple[bytes, tuple[PyFormat, ...], tuple[int, ...]]:
    """``sql`` with ``$1, $2...`` for its placeholders, each parameter's format for
    psycopg's adapters, and for libpq (1: binary)."""
    formats: list[PyFormat] = []

    def number(match: re.Match[str]) -> str:
        formats.append(PyFormat.BINARY if match.group() == "%b" else PyFormat.TEXT)
        return f"${len(formats)}"

    query = _PLACEHOLDER.sub(number, sql).encode()
    return query, tuple(formats), tuple(int(fmt is PyFormat.BINARY) for fmt in formats)


class PipelinedStatement(Generic[Row]):
    """One statement of a :func:`pipelined_transaction` (a cursor's subset)."""

    def __init__(self, pipeline: _Pipeline, make_row: MakeRow[Row]) -> None:
        self._pipeline = pipeline
        self._make_row = make_row
        self._rows: list[Row] | None = None

    def execute(self, sql: str, params: Sequence[Any], *, prepare: bool = True) -> None:
        """Send ``sql``, prepared once per connection (``prepare`` is always so here)."""
        self._pipeline.send(self, sql, params)

    def fetchall(self) -> list[Row]:
        while self._rows is None:
            self._pipeline.read_next()
        return self._rows

    def fetchone(self) -> Row | None:
        rows = self.fetchall()
        return rows[0] if rows else None


class _Pipeline:
    """libpq's pipeline mode on Django's connection: see :func:`pipelined_transaction`."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._pgconn = raw.pgconn
        self._transformer = Transformer(raw)
        self._encoding = raw.info.encoding
        self._prepared = _prepared_by_connection.setdefault(raw, _Prepared())
        # Sent, answer not read yet, in order: a statement, the SQL text of a PREPARE (its
        # name is kept only once PostgreSQL confirmed it), or None (an answer to discard).
        self._waiting: deque[PipelinedStatement[Any] | str | None] = deque()
        self._unflushed = False
        self._error: psycopg.Error | None = None
        self._poll = select.poll()
        self._poll.register(self._pgconn.socket, select.POLLIN)
        # How long one wait for the server may last (None: no bound).
        self._wait_ms: int | None = settings.DB_PIPELINE_WAIT_MS or None
        self._silent = False  # the server stopped answering: nothing more is sent or read

    def open(self) -> None:
        self._pgconn.enter_pipeline_mode()

    def statement(self, make_row: MakeRow[Any] = tuple) -> PipelinedStatement[Any]:
        return PipelinedStatement(self, make_row)

    def send(self, statement: PipelinedStatement[Any], sql: str, params: Sequence[Any]) -> None:
        query, formats, binary = _numbered(sql)
        name = self._prepared.names.get(sql)
        if name is None:
            name = self._prepare(sql, query)
        else:
            self._prepared.names.move_to_end(sql)
        values = self._transformer.dump_sequence(params, formats)
        self._pgconn.send_query_prepared(name, values, binary)
        self._waiting.append(statement)
        self._unflushed = True

    def _prepare(self, sql: str, query: bytes) -> bytes:
        prepared = self._prepared
        prepared.counter += 1
        name = f"_mirror_{prepared.counter}".encode()
        self._pgconn.send_prepare(name, query)
        self._waiting.append(sql)
        prepared.names[sql] = name
        while len(prepared.names) > _MAX_PREPARED:
            _, old = prepared.names.popitem(last=False)
            self._pgconn.send_query_params(b"DEALLOCATE " + old, None)
            self._waiting.append(None)
        return name

    def read_next(self) -> None:
        """Read the answer to the oldest statement sent and not read yet."""
        if self._unflushed:
            self._pgconn.send_flush_request()
            self._flush()
        statement = self._waiting.popleft()
        result = self._result()
        if self._result() is not None:  # each statement's answer ends with "no result"
            raise psycopg.InterfaceError("unexpected result in the pipeline")
        if result is None:
            raise psycopg.InterfaceError("missing result in the pipeline")
        if result.status == ExecStatus.FATAL_ERROR:
            self._error = error_from_result(result, self._encoding)
            if isinstance(self._error, psycopg.errors.InvalidSqlStatementName):
                # A DISCARD ALL or the like: this transaction fails, the next prepares anew.
                self._prepared.names.clear()
        if self._error is not None:  # this statement failed, or an earlier one did
            if isinstance(statement, str):  # a PREPARE that did not happen
                self._prepared.names.pop(statement, None)
            elif statement is not None:
                statement._rows = []
            raise self._error
        if isinstance(statement, PipelinedStatement):
            self._transformer.set_pgresult(result)
            statement._rows = self._transformer.load_rows(0, result.ntuples, statement._make_row)

    def close(self, *, commit: bool) -> None:
        """End the transaction with the Sync (after a ROLLBACK unless ``commit``), read
        every answer left, and leave pipeline mode. With ``commit``, raises the first error
        the transaction met: a statement's, or the commit's own (deferred constraints).
        Without, the caller's exception is what is raised: errors here are dropped. A
        connection whose pipeline cannot be ended cleanly is closed."""
        if self._silent:  # already closed (see _wait): the block's error is the timeout
            return
        try:
            if not commit and self._error is None:
                # PostgreSQL warns that no transaction is in progress (the implicit one is
                # not a transaction block) and rolls the implicit transaction back.
                self._pgconn.send_query_params(b"ROLLBACK", None)
                self._waiting.append(None)
            self._pgconn.pipeline_sync()
            self._flush()
            while self._waiting:
                with suppress(psycopg.DatabaseError):  # kept in self._error
                    self.read_next()
            self._read_to_sync()
            self._pgconn.exit_pipeline_mode()
        except psycopg.Error:
            connection.close()  # the session's state is unknown: never reuse it
            if commit:
                raise
            return
        if commit and self._error is not None:
            raise self._error

    def _read_to_sync(self) -> None:
        """Read up to the Sync's own answer, keeping the first error (the commit's)."""
        nothing_in_a_row = 0
        while True:
            result = self._result()
            if result is None:  # libpq ends each answer with one "no result", never two
                nothing_in_a_row += 1
                if nothing_in_a_row > 1:
                    raise psycopg.InterfaceError("no Sync answer in the pipeline")
                continue
            nothing_in_a_row = 0
            if result.status == ExecStatus.PIPELINE_SYNC:
                return
            if result.status == ExecStatus.FATAL_ERROR:
                self._error = self._error or error_from_result(result, self._encoding)

    def _flush(self) -> None:
        """Send what libpq buffered, reading answers meanwhile if the server sends any."""
        self._unflushed = False
        while self._pgconn.flush() == 1:
            self._wait(select.POLLIN | select.POLLOUT)
            self._pgconn.consume_input()

    def _result(self) -> PGresult | None:
        self._pgconn.consume_input()
        while self._pgconn.is_busy():
            self._wait(select.POLLIN)
            self._pgconn.consume_input()
        return self._pgconn.get_result()

    def _wait(self, events: int) -> None:
        """Wait for the socket, at most ``DB_PIPELINE_WAIT_MS``: past it the server is
        taken for gone (it stopped answering: a frozen host, a partition), the connection
        is closed, and ``OperationalError`` raised (a 503, as for a database that is down).
        PostgreSQL answers within its statement timeout, which the default bound exceeds."""
        self._poll.modify(self._pgconn.socket, events)
        if not self._poll.poll(self._wait_ms):
            self._silent = True
            connection.close()  # its state is unknown: never reuse it
            raise psycopg.OperationalError(
                f"the database did not answer within {self._wait_ms} ms in a pipeline"
            )
