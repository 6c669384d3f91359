"""The console's search of an org's mirror, only through indexes (never the receipt text).

What a search term finds, newest first:

- the receipt with that full action hash (the (org, action_hash) unique index);
- the receipts of the session with that id, in session order (the session index);
- otherwise, the receipts whose tool name, workflow, rule id or agent identity is the term
  or starts with it: for each column the first ``VALUES_PER_COLUMN`` values that start
  with it (a walk of the column's (org, column, seq) index from value to value, never
  through the receipts of one value), and for each of those values its receipts newest
  first, a range of the same index.

Each of these is a *branch* of the page (``apps.tenancy.admin_paging``): the page reads at
most a page of rows from each, so a search costs the same in an org of ten million
receipts as in one of ten thousand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from apps.receipts.columns import INDEXED_MAX_CHARS, indexed_text
from apps.receipts.models import MirrorEntry

# The lookup columns the search reads by prefix, each with its (org, column, seq) index.
SEARCHED_COLUMNS = ("tool_name", "workflow", "rule_id", "agent_identity")
VALUES_PER_COLUMN = 10
# The last code point: every value that starts with a prefix sorts below prefix + this, in
# the "C" collation of the lookup columns (bytes).
_ABOVE_EVERY_SUFFIX = "\U0010ffff"
_ACTION_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass
class MirrorSearch:
    """The branches a term's page merges, and what to tell the reader about them."""

    branches: list[QuerySet[MirrorEntry]] = field(default_factory=list)
    session: bool = False  # the term is a session id: the session, in its order
    # Columns where more values start with the term than are searched ("type more").
    crowded: list[str] = field(default_factory=list)


def prefix_values(*, org_id: int, column: str, prefix: str, limit: int) -> list[str]:
    """The first ``limit`` distinct values of ``column`` in the org that start with
    ``prefix``, in byte order: one index descent a value (a recursive walk that jumps
    from each value to the next), so a value held by a million receipts costs one step."""
    if column not in SEARCHED_COLUMNS:
        raise ValueError(f"{column} is not a searched column")
    upper = prefix + _ABOVE_EVERY_SUFFIX
    table = MirrorEntry._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.execute(
                f"SELECT DISTINCT {column} FROM {table} WHERE org_id = %s "  # noqa: S608
                f"AND {column} >= %s AND {column} < %s ORDER BY {column} LIMIT %s",
                [org_id, prefix, upper, limit],
            )
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(
            f"""
            WITH RECURSIVE found(value, n) AS (
                (SELECT {column}, 1 FROM {table}
                 WHERE org_id = %s AND {column} >= %s AND {column} < %s
                 ORDER BY {column} LIMIT 1)
                UNION ALL
                SELECT (SELECT {column} FROM {table}
                        WHERE org_id = %s AND {column} > found.value AND {column} < %s
                        ORDER BY {column} LIMIT 1), found.n + 1
                FROM found WHERE found.value IS NOT NULL AND found.n < %s
            )
            SELECT value FROM found WHERE value IS NOT NULL
            """,  # noqa: S608
            [org_id, prefix, upper, org_id, upper, limit],
        )
        return [row[0] for row in cursor.fetchall()]


def mirror_search(*, queryset: QuerySet[MirrorEntry], org_id: int, term: str) -> MirrorSearch:
    """The branches that find ``term`` in the org's receipts (module docstring)."""
    term = term.strip()
    search = MirrorSearch()
    if not term:
        return search
    org_rows = queryset.filter(org_id=org_id)
    stored = indexed_text(term)
    if org_rows.filter(session_id=stored).exists():
        search.session = True
        search.branches.append(org_rows.filter(session_id=stored))
        return search
    if _ACTION_HASH.fullmatch(term):
        search.branches.append(org_rows.filter(action_hash=term))
    for column in SEARCHED_COLUMNS:
        if len(term) > INDEXED_MAX_CHARS:  # stored bounded: only the whole value matches
            values = [stored]
        else:
            values = prefix_values(
                org_id=org_id, column=column, prefix=term, limit=VALUES_PER_COLUMN + 1
            )
            if len(values) > VALUES_PER_COLUMN:
                search.crowded.append(column)
                values = values[:VALUES_PER_COLUMN]
        search.branches.extend(org_rows.filter(**{column: value}) for value in values)
    return search


def seq_range_received(
    *, org_id: int, since: datetime | None, until: datetime | None
) -> tuple[int, int] | None:
    """The org's seq range received in [since, until): the first and the last entry of
    the range on the (org, received_at) index, one descent each. Entries are appended in
    the order they are received (the head lock), so the range holds them all; None when
    nothing was received then."""
    entries = MirrorEntry.objects.filter(org_id=org_id)
    low: Any = 1
    if since is not None:
        low = (
            entries.filter(received_at__gte=since)
            .order_by("received_at")
            .values_list("seq", flat=True)
            .first()
        )
    high: Any = None
    if until is not None:
        high = (
            entries.filter(received_at__lt=until)
            .order_by("-received_at")
            .values_list("seq", flat=True)
            .first()
        )
    else:
        high = entries.order_by("-seq").values_list("seq", flat=True).first()
    if low is None or high is None or low > high:
        return None
    return int(low), int(high)
