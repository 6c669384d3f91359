"""Reading stored nodes: every root or proof is one query for at most 2·⌈log2 n⌉ rows.

On PostgreSQL the wanted ``(level, index)`` pairs travel as two arrays joined to the table
(one index lookup each, and a statement whose text never changes); elsewhere (SQLite,
local trial only) an OR of the pairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_

from django.db import connection
from django.db.models import Q

from apps.transparency.models import OrgTreeNode, TopNode
from apps.transparency.tree.merkle import Node, NodeHashes, NodeReader


class MissingNode(LookupError):
    """A node the stored size promises is not stored: the storage is damaged."""


_ORG_NODES = (
    "SELECT n.level, n.index, n.hash FROM transparency_orgtreenode n "
    "JOIN unnest(%s::smallint[], %s::bigint[]) AS w(level, index) "
    "ON n.level = w.level AND n.index = w.index WHERE n.org_id = %s"
)
_TOP_NODES = (
    "SELECT n.level, n.index, n.hash FROM transparency_topnode n "
    "JOIN unnest(%s::smallint[], %s::bigint[]) AS w(level, index) "
    "ON n.level = w.level AND n.index = w.index"
)


def _where(needed: set[Node]) -> Q:
    return reduce(or_, (Q(level=level, index=index) for level, index in sorted(needed)))


def _checked(needed: set[Node], rows: Iterable[tuple[int, int, bytes | memoryview]]) -> NodeHashes:
    found = {(level, index): bytes(value) for level, index, value in rows}
    if len(found) != len(needed):
        raise MissingNode(f"missing tree node(s): {sorted(needed - set(found))[:4]}")
    return found


def _raw(sql: str, needed: set[Node], *extra: int) -> list[tuple[int, int, bytes]]:
    ordered = sorted(needed)
    with connection.cursor() as cursor:
        cursor.execute(
            sql, [[level for level, _ in ordered], [index for _, index in ordered], *extra]
        )
        return list(cursor.fetchall())


def org_node_reader(org_pk: int) -> NodeReader:
    def read(needed: set[Node]) -> NodeHashes:
        if not needed:
            return {}
        if connection.vendor == "postgresql":
            return _checked(needed, _raw(_ORG_NODES, needed, org_pk))
        rows = OrgTreeNode.objects.filter(_where(needed), org_id=org_pk).values_list(
            "level", "index", "hash"
        )
        return _checked(needed, rows)

    return read


def top_node_reader() -> NodeReader:
    def read(needed: set[Node]) -> NodeHashes:
        if not needed:
            return {}
        if connection.vendor == "postgresql":
            return _checked(needed, _raw(_TOP_NODES, needed))
        rows = TopNode.objects.filter(_where(needed)).values_list("level", "index", "hash")
        return _checked(needed, rows)

    return read
