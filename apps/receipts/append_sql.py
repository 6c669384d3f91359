"""The SQL of the append transaction. The push path is the service's hot path; through the
ORM its statements cost several milliseconds of query compilation on a small machine, so
here we speak SQL directly, prepared once per connection on PostgreSQL.

One transaction per append (or per batch), holding the org's ``MirrorHead`` row lock:

1. lock the org's head row;
2. read the entries that matter to this receipt: one with the same action_hash (a
   duplicate) and the session neighbours at seq and seq - 1. A separate statement sent
   *after* the lock: under READ COMMITTED a statement's snapshot predates its own lock
   wait, so a join with the lock would miss what the previous holder appended;
3. insert the entry and advance the head in one statement (a data-modifying CTE on
   PostgreSQL; two statements on SQLite, which has no such CTE and no row locks).

:func:`append_transaction` frames it, and is the only door to ``apps.common.prepared``
on the push path. Outside a transaction of Django's (every request), it is pipelined in the
pipeline's implicit transaction: 1 and 2 travel together and 3 with the Sync that commits,
two round trips and three statements in all. Inside one (a caller's ``atomic``, the
tests), or when the append runs ORM statements too, it is an ``atomic`` block of its own
running the same statements one by one.

Column names come from the models, so a renamed field breaks loudly here, not silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, NamedTuple, TypeVar
from weakref import WeakKeyDictionary

import orjson
from django.db import connection, transaction

from apps.common.prepared import can_pipeline, pipelined_transaction, prepared_cursors
from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.tenancy.org_context import settle

ENTRY_TABLE = MirrorEntry._meta.db_table
HEAD_TABLE = MirrorHead._meta.db_table
ENTRY_COLUMNS = [
    field.column
    for field in MirrorEntry._meta.concrete_fields
    if not field.primary_key and field.column != "superseded_by"
]

# Two branches, each a lookup on one index, never an OR: a prepared statement's generic
# plan cannot know the values, and for an OR it may read the org's entries through an index
# on the org alone, O(entries) per push. The session neighbours are a range (seq - 1 to
# seq), not ``IN (seq, seq - 1)``: with no statistics (a new table, autovacuum behind) a
# generic plan may match an IN list on the index's last column as a filter, reading the
# whole session per push; a range is always an index condition
# (tests/receipts/test_append_plans.py).
_RELATED_COLUMNS = (
    "id, seq, session_seq, action_hash, link_hash, trust_level, claimed_trust_level, session_id"
)
_RELATED = (
    f"SELECT {_RELATED_COLUMNS} FROM {ENTRY_TABLE} "  # noqa: S608
    "WHERE org_id = %s AND action_hash = %s "
    f"UNION ALL SELECT {_RELATED_COLUMNS} FROM {ENTRY_TABLE} "
    "WHERE org_id = %s AND session_id = %s AND session_seq BETWEEN %s AND %s "
    "AND action_hash <> %s"
)
# The org's head row, by its primary key (``FOR UPDATE`` on PostgreSQL: the append lock).
_LOCK_HEAD = f"SELECT size, head, month, month_count FROM {HEAD_TABLE} WHERE org_id = %s"  # noqa: S608
_CREATE_HEAD = (
    f"INSERT INTO {HEAD_TABLE} (org_id, size, head, month, month_count) "  # noqa: S608
    "VALUES (%s, 0, %s, '', 0) ON CONFLICT (org_id) DO NOTHING"
)
_ADVANCE_HEAD = (
    f"UPDATE {HEAD_TABLE} SET size = %s, head = %s, month = %s, month_count = %s "  # noqa: S608
    "WHERE org_id = %s"
)


# A batch's related entries in one statement: the entries with any of the batch's action
# hashes, and those at any of its (session_id, session_seq) positions. Prepared like the
# others: a custom plan would be made with the org's own statistics, and an org that was
# new when the table was last analysed is estimated at one row, so its lookups tie with a
# read of the whole org through the org-only index (measured: a fresh org's batches slowed
# as it grew); a generic plan estimates an average org.
_RELATED_MANY = (
    f"SELECT {_RELATED_COLUMNS} FROM {ENTRY_TABLE} "  # noqa: S608
    "WHERE org_id = %s AND action_hash = ANY(%s::text[]) "
    f"UNION ALL SELECT {', '.join('e.' + c.strip() for c in _RELATED_COLUMNS.split(','))} "
    f"FROM {ENTRY_TABLE} e JOIN unnest(%s::text[], %s::bigint[]) AS k(session_id, session_seq) "
    "ON e.session_id = k.session_id AND e.session_seq = k.session_seq WHERE e.org_id = %s"
)


def array_literal(values: list[Any]) -> str:
    """A PostgreSQL array literal of ``values`` (strings or integers), each element
    double-quoted with its backslashes and quotes escaped, for a ``%s::text[]`` or
    ``%s::bigint[]`` parameter: psycopg dumps a Python list element by element, which
    costs a batch measurably per receipt; one string is one dump."""
    quoted = ('"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"' for value in values)
    return "{" + ",".join(quoted) + "}"


def related_many_params(
    org_id: int, receipts: list[tuple[str, str | None, int | None]]
) -> list[Any]:
    """The parameters of ``_RELATED_MANY`` for a batch of (action_hash, session_id,
    session_seq): its action hashes, and the session positions at seq and seq - 1."""
    hashes = list({action_hash for action_hash, _, _ in receipts})
    positions = {
        (session_id, seq)
        for _, session_id, session_seq in receipts
        if session_id and session_seq is not None
        for seq in (session_seq, session_seq - 1)
    }
    return [
        org_id,
        array_literal(hashes),
        array_literal([position[0] for position in positions]),
        array_literal([position[1] for position in positions]),
        org_id,
    ]


@cache
def _insert_entries() -> str:
    """INSERT of any number of entries in one statement (PostgreSQL): every column but the
    receipt text from one JSON array of objects (one member a column; orjson writes it far
    faster than psycopg dumps one PostgreSQL array a column), zipped row by row (``ROWS
    FROM``) with the receipt texts as one binary ``text[]``. Inside the JSON each receipt's
    quotes would be escaped and PostgreSQL would un-escape them again; binary, they are
    copied."""
    json_columns = [column for column in ENTRY_COLUMNS if column != "receipt"]
    definitions = ", ".join(
        f"{field.column} {field.db_type(connection)}"
        for field in MirrorEntry._meta.concrete_fields
        if field.column in json_columns
    )
    return (
        f"INSERT INTO {ENTRY_TABLE} ({', '.join(ENTRY_COLUMNS)}, superseded_by) "  # noqa: S608
        f"SELECT {', '.join(ENTRY_COLUMNS)}, '' FROM ROWS FROM ("
        f"json_to_recordset(%s::json) AS ({definitions}), unnest(%b::text[])"
        f") AS entry({', '.join(json_columns)}, receipt)"
    )


@cache
def _insert_entry() -> str:
    """INSERT of one entry; on PostgreSQL each parameter cast to its column's type, so the
    statement is prepared for those types whatever Python value comes first (None)."""
    postgres = connection.vendor == "postgresql"
    values = ", ".join(
        f"%s::{field.db_type(connection)}" if postgres else "%s"
        for field in MirrorEntry._meta.concrete_fields
        if field.column in ENTRY_COLUMNS
    )
    return (
        f"INSERT INTO {ENTRY_TABLE} ({', '.join(ENTRY_COLUMNS)}, superseded_by) "  # noqa: S608
        f"VALUES ({values}, '')"
    )


class LockedHead(NamedTuple):
    """The org's head row, as ``_LOCK_HEAD`` reads it."""

    size: int
    head: str
    month: str
    month_count: int


class RelatedEntry(NamedTuple):
    """An entry as ``_RELATED`` reads it (``_RELATED_COLUMNS``)."""

    entry_id: int
    seq: int
    session_seq: int | None
    action_hash: str
    link_hash: str
    trust_level: str
    claimed_trust_level: str
    session_id: str = ""


def _related_params(
    org_id: int, action_hash: str, session_id: str | None, session_seq: int | None
) -> list[Any]:
    return [org_id, action_hash, org_id, session_id, (session_seq or 0) - 1, session_seq,
            action_hash]  # fmt: skip


# The connection runs prepared statements on their generic plans, always
# (``plan_cache_mode``, set when it opens: config/settings/base.py): a custom plan would
# estimate with the org's own statistics, one row for an org that was new at the last
# ANALYZE, whose lookups then tie with a read of the whole org (measured: a fresh org's
# pushes and batches slowed as it grew, while grown orgs kept their rate). PostgreSQL
# caches the generic plan of a prepared statement for the connection's life. A
# generic plan made while a table is nearly empty (or was analysed then) is a sequential
# scan of the head table, or, for the related-entries read, a lookup by the org through the
# org-only index (the smallest: the estimates tie at one row), which then reads all the
# org's entries on every push. So the append's statements are prepared anew, and planned
# anew, each time the connection's count of append transactions doubles from
# ``REPLAN_FROM`` on (a comment in each statement names the generation): a plan made after n
# appends serves at most the next n, and once a connection has appended a thousand entries
# the table holds at least as many and the lookup indexes win
# (tests/receipts/test_append_plans.py). About fifteen plans in a connection's life instead
# of one; ``apps.common.prepared`` deallocates the oldest.
REPLAN_FROM = 32
_appends_by_connection: WeakKeyDictionary[Any, int] = WeakKeyDictionary()


def _plan_generation(raw_connection: Any) -> str:
    """The comment naming this connection's plan generation; counts this transaction."""
    count = _appends_by_connection.get(raw_connection, 0) + 1
    _appends_by_connection[raw_connection] = count
    return f" /* plan {(count // REPLAN_FROM).bit_length()} */"


class AppendStatements:
    """The statements of one append transaction, on cursors from ``new_cursor``."""

    def __init__(
        self,
        new_cursor: Callable[[], Any],
        *,
        postgres: bool,
        raw_connection: Any = None,
        pipelined: bool = False,
    ) -> None:
        self._new_cursor = new_cursor
        self._postgres = postgres
        # In a pipeline nothing but these statements may run until the block ends.
        self.pipelined = pipelined
        self._generation = _plan_generation(raw_connection) if postgres else ""

    def outside_pipeline(self) -> None:
        """The append has work beyond its own statements (an event to record): in a
        pipeline, this attempt ends here and :func:`append_transaction` runs it again in a
        transaction of Django's."""
        if self.pipelined:
            raise _OutsidePipeline

    def _send(self, sql: str, params: list[Any]) -> Any:
        """Send ``sql``; in a pipeline, prepared once per connection and plan generation
        (inside a transaction of Django's, psycopg's cursors bind server-side unprepared)."""
        cursor = self._new_cursor()
        if self._postgres:
            cursor.execute(sql + self._generation, params, prepare=True)
        else:
            cursor.execute(sql, params)
        return cursor

    def lock_and_read(
        self, *, org_id: int, action_hash: str, session_id: str | None, session_seq: int | None
    ) -> tuple[LockedHead | None, list[RelatedEntry]]:
        """Lock the org's head row (None: no head row yet), then read the related entries.
        Both statements are sent before either answer is read."""
        lock = " FOR UPDATE" if self._postgres else ""
        head_cursor = self._send(_LOCK_HEAD + lock, [org_id])
        related_cursor = self._send(
            _RELATED, _related_params(org_id, action_hash, session_id, session_seq)
        )
        row = head_cursor.fetchone()
        related = [RelatedEntry._make(entry) for entry in related_cursor.fetchall()]
        return (LockedHead._make(row) if row else None), related

    def lock_and_read_many(
        self, *, org_id: int, receipts: list[tuple[str, str | None, int | None]]
    ) -> tuple[LockedHead | None, list[RelatedEntry]]:
        """For a batch of (action_hash, session_id, session_seq): lock the org's head row,
        then read every entry related to any of them, both sent before either answer is
        read (one round trip on PostgreSQL). On PostgreSQL the read is one statement for
        the whole batch (``_RELATED_MANY``); on SQLite one read a receipt."""
        lock = " FOR UPDATE" if self._postgres else ""
        head_cursor = self._send(_LOCK_HEAD + lock, [org_id])
        if self._postgres:
            reads = [self._send(_RELATED_MANY, related_many_params(org_id, receipts))]
        else:
            reads = [
                self._send(_RELATED, _related_params(org_id, action_hash, session_id, seq))
                for action_hash, session_id, seq in receipts
            ]
        row = head_cursor.fetchone()
        entries = (RelatedEntry._make(entry) for read in reads for entry in read.fetchall())
        related = {entry.entry_id: entry for entry in entries}
        return (LockedHead._make(row) if row else None), list(related.values())

    def insert_many_and_advance(
        self,
        *,
        entries: list[dict[str, Any]],
        receipts: list[str],
        head: LockedHead,
        org_id: int,
    ) -> None:
        """Insert a batch's entries (in ``seq`` order) and move the head to the last one.
        ``entries`` hold every column but ``receipt``, whose texts are ``receipts``, in the
        same order (see ``_insert_entries``)."""
        head_values = [head.size, head.head, head.month, head.month_count, org_id]
        if not self._postgres:
            for entry, receipt in zip(entries, receipts, strict=True):
                row = {**entry, "receipt": receipt}
                self._send(_insert_entry(), [row[column] for column in ENTRY_COLUMNS])
            self._send(_ADVANCE_HEAD, head_values)
            return
        if len(entries) != len(receipts):
            raise ValueError("one receipt text per entry")
        self._send(
            f"WITH inserted AS ({_insert_entries()} RETURNING 1) {_ADVANCE_HEAD}",
            [orjson.dumps(entries).decode(), receipts, *head_values],
        )

    def create_head(self, *, org_id: int) -> None:
        """The head row of an org's first append, racing safely with another first one."""
        self._send(_CREATE_HEAD, [org_id, EMPTY_CHAIN_HEAD])

    def insert_and_advance(self, *, entry: dict[str, Any], head: LockedHead, org_id: int) -> None:
        """Insert the entry and move the head to it (size, chain hash, month counter)."""
        values = [entry[column] for column in ENTRY_COLUMNS]
        head_values = [head.size, head.head, head.month, head.month_count, org_id]
        if self._postgres:
            self._send(
                f"WITH inserted AS ({_insert_entry()} RETURNING 1) {_ADVANCE_HEAD}",
                values + head_values,
            )
        else:
            self._send(_insert_entry(), values)
            self._send(_ADVANCE_HEAD, head_values)


Result = TypeVar("Result")


class _OutsidePipeline(Exception):
    """Raised by :meth:`AppendStatements.outside_pipeline` in a pipelined attempt."""


def append_transaction(
    work: Callable[[AppendStatements], Result],
    *,
    orm: bool = False,
    refusals: tuple[type[Exception], ...] = (),
) -> Result:
    """Run ``work`` in one append transaction: committed when it returns, rolled back if
    it raises, except for ``refusals``: raised by ``work`` once it has decided, before
    writing anything, that the append is refused, they end the transaction normally
    (nothing to undo, and a rollback would cost psycopg's prepared statements in its
    pipeline mode) and are raised after it.

    ``orm``: ``work`` runs more than the append's statements (a supersede marks the entry
    it replaces through the ORM), which a pipeline cannot carry: a transaction of Django's
    then. ``work`` that finds out under the lock that it needs one (a ``quota.threshold``
    event to record, :meth:`AppendStatements.outside_pipeline`) has its pipelined attempt
    rolled back, before it wrote anything, and runs again in a transaction of Django's.
    A pipelined attempt refuses any other statement
    (``apps.common.prepared.StatementInPipeline``)."""
    try:
        return _attempt(work, orm=orm, refusals=refusals)
    except _OutsidePipeline:  # at most twice a month per org (80%, 100%)
        return _attempt(work, orm=True, refusals=refusals)


def _attempt(
    work: Callable[[AppendStatements], Result],
    *,
    orm: bool,
    refusals: tuple[type[Exception], ...],
) -> Result:
    refusal: Exception | None = None
    with _statements(orm=orm) as sql:
        try:
            result = work(sql)
        except refusals as refused:
            refusal = refused
    if refusal is not None:
        raise refusal
    return result


@contextmanager
def _statements(*, orm: bool) -> Iterator[AppendStatements]:
    settle()  # its statements bypass Django's cursors (and their org-context check)
    if can_pipeline() and not orm:
        with pipelined_transaction() as new_cursor:
            yield AppendStatements(
                new_cursor, postgres=True, raw_connection=connection.connection, pipelined=True
            )
    elif connection.vendor == "postgresql":
        with transaction.atomic(), prepared_cursors() as new_cursor:
            yield AppendStatements(new_cursor, postgres=True, raw_connection=connection.connection)
    else:
        with transaction.atomic():
            yield AppendStatements(connection.cursor, postgres=False)
