"""The SQL of the append critical section, kept to three round trips.

The push path is the service's hot path; through the ORM its five statements cost several
milliseconds of query compilation on a small machine. Inside the lock we therefore speak
SQL directly (psycopg prepares repeated statements server-side):

1. lock the org's head row;
2. one query for the entries that matter to this receipt: one with the same action_hash
   (a duplicate) and the session neighbours at seq and seq - 1. It must run *after* the
   lock: under READ COMMITTED a statement's snapshot predates its own lock wait;
3. insert the entry and advance the head in one statement (a data-modifying CTE on
   PostgreSQL; two statements on SQLite, which has no such CTE and no row locks).

Column names come from the models, so a renamed field breaks loudly here, not silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.backends.utils import CursorWrapper

from apps.receipts.models import MirrorEntry, MirrorHead

ENTRY_TABLE = MirrorEntry._meta.db_table
HEAD_TABLE = MirrorHead._meta.db_table
ENTRY_COLUMNS = [
    field.column
    for field in MirrorEntry._meta.concrete_fields
    if not field.primary_key and field.column != "superseded_by"
]


@dataclass(frozen=True)
class LockedHead:
    size: int
    head: str
    month: str
    month_count: int


def lock_head(cursor: CursorWrapper, *, org_id: int) -> LockedHead | None:
    """Lock the org's head row; None when the org has no head row yet."""
    lock = " FOR UPDATE" if connection.vendor == "postgresql" else ""
    cursor.execute(
        f"SELECT size, head, month, month_count FROM {HEAD_TABLE} "  # noqa: S608 (constants)
        f"WHERE org_id = %s{lock}",
        [org_id],
    )
    row = cursor.fetchone()
    return LockedHead(*row) if row else None


def create_head(cursor: CursorWrapper, *, org_id: int) -> None:
    """Create the head row of an org's first append, racing safely with another first one."""
    cursor.execute(
        f"INSERT INTO {HEAD_TABLE} (org_id, size, head, month, month_count) "  # noqa: S608
        "VALUES (%s, 0, %s, '', 0) ON CONFLICT (org_id) DO NOTHING",
        [org_id, "0" * 64],
    )


@dataclass(frozen=True)
class RelatedEntry:
    entry_id: int
    seq: int
    session_seq: int | None
    action_hash: str
    link_hash: str


def related_entries(
    cursor: CursorWrapper,
    *,
    org_id: int,
    action_hash: str,
    session_id: str | None,
    session_seq: int | None,
) -> list[RelatedEntry]:
    """The entry with ``action_hash`` if mirrored, and the session's entries at
    ``session_seq`` and ``session_seq - 1`` (both indexes serve this one query)."""
    cursor.execute(
        f"SELECT id, seq, session_seq, action_hash, link_hash FROM {ENTRY_TABLE} "  # noqa: S608
        "WHERE org_id = %s AND (action_hash = %s "
        "OR (session_id = %s AND session_seq IN (%s, %s)))",
        [org_id, action_hash, session_id, session_seq, (session_seq or 0) - 1],
    )
    return [RelatedEntry(*row) for row in cursor.fetchall()]


def insert_and_advance(
    cursor: CursorWrapper, *, entry: dict[str, Any], head: LockedHead, org_id: int
) -> None:
    """Insert the entry and move the head to it (size, chain hash, month counter)."""
    columns = ", ".join(ENTRY_COLUMNS)
    placeholders = ", ".join(["%s"] * len(ENTRY_COLUMNS))
    values: list[Any] = [entry[column] for column in ENTRY_COLUMNS]
    head_values: list[Any] = [head.size, head.head, head.month, head.month_count, org_id]
    update = f"UPDATE {HEAD_TABLE} SET size = %s, head = %s, month = %s, month_count = %s WHERE org_id = %s"  # noqa: S608, E501
    insert = f"INSERT INTO {ENTRY_TABLE} ({columns}, superseded_by) VALUES ({placeholders}, '')"  # noqa: S608
    if connection.vendor == "postgresql":
        cursor.execute(f"WITH inserted AS ({insert} RETURNING 1) {update}", values + head_values)
    else:
        cursor.execute(insert, values)
        cursor.execute(update, head_values)
