"""Reading stored nodes: every root or proof is one query for at most 2·⌈log2 n⌉ rows."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_

from django.db.models import Q

from apps.transparency.models import OrgTreeNode, TopNode
from apps.transparency.tree.merkle import Node, NodeHashes, NodeReader


class MissingNode(LookupError):
    """A node the stored size promises is not stored: the storage is damaged."""


def _where(needed: set[Node]) -> Q:
    return reduce(or_, (Q(level=level, index=index) for level, index in sorted(needed)))


def _checked(needed: set[Node], rows: Iterable[tuple[int, int, bytes | memoryview]]) -> NodeHashes:
    found = {(level, index): bytes(value) for level, index, value in rows}
    if len(found) != len(needed):
        raise MissingNode(f"missing tree node(s): {sorted(needed - set(found))[:4]}")
    return found


def org_node_reader(org_pk: int) -> NodeReader:
    def read(needed: set[Node]) -> NodeHashes:
        if not needed:
            return {}
        rows = OrgTreeNode.objects.filter(_where(needed), org_id=org_pk).values_list(
            "level", "index", "hash"
        )
        return _checked(needed, rows)

    return read


def top_node_reader() -> NodeReader:
    def read(needed: set[Node]) -> NodeHashes:
        if not needed:
            return {}
        rows = TopNode.objects.filter(_where(needed)).values_list("level", "index", "hash")
        return _checked(needed, rows)

    return read
