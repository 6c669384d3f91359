"""The publisher's bulk writes: on PostgreSQL one statement over arrays (``unnest``) for
thousands of rows, with no per-row SQL to compile; elsewhere the ORM's bulk methods."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from apps.transparency.models import OrgLog, OrgTreeNode, TopNode

BATCH = 20_000


def _columns(rows: Sequence[tuple[object, ...]]) -> list[list[object]]:
    return [list(column) for column in zip(*rows, strict=True)]


def org_nodes_insert(rows: Sequence[tuple[int, int, int, bytes]]) -> None:
    """``(org_id, level, index, hash)`` rows into the org trees."""
    if connection.vendor != "postgresql":
        OrgTreeNode.objects.bulk_create(
            [OrgTreeNode(org_id=o, level=lv, index=i, hash=h) for o, lv, i, h in rows],
            batch_size=5_000,
        )
        return
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            cursor.execute(
                "INSERT INTO transparency_orgtreenode (org_id, level, index, hash) "
                "SELECT * FROM unnest(%s::bigint[], %s::smallint[], %s::bigint[], %s::bytea[])",
                _columns(rows[start : start + BATCH]),
            )


def top_nodes_insert(rows: Sequence[tuple[int, int, bytes]]) -> None:
    """``(level, index, hash)`` rows into the top tree."""
    if connection.vendor != "postgresql":
        TopNode.objects.bulk_create(
            [TopNode(level=lv, index=i, hash=h) for lv, i, h in rows], batch_size=5_000
        )
        return
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            cursor.execute(
                "INSERT INTO transparency_topnode (level, index, hash) "
                "SELECT * FROM unnest(%s::smallint[], %s::bigint[], %s::bytea[])",
                _columns(rows[start : start + BATCH]),
            )


def org_trees_update(rows: Sequence[tuple[int, int, bytes]]) -> None:
    """``(org_id, tree_size, tree_root)``: the stored trees' new sizes and roots."""
    if connection.vendor != "postgresql":
        OrgLog.objects.bulk_update(
            [OrgLog(org_id=o, tree_size=n, tree_root=r) for o, n, r in rows],
            ["tree_size", "tree_root"],
            batch_size=1_000,
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE transparency_orglog AS l SET tree_size = w.size, tree_root = w.root "
            "FROM unnest(%s::bigint[], %s::bigint[], %s::bytea[]) AS w(org_id, size, root) "
            "WHERE l.org_id = w.org_id",
            _columns(rows),
        )


def org_logs_published(rows: Sequence[tuple[int, int]]) -> None:
    """``(org_id, published_size)``: the sizes an epoch published."""
    if connection.vendor != "postgresql":
        OrgLog.objects.bulk_update(
            [OrgLog(org_id=o, published_size=n) for o, n in rows],
            ["published_size"],
            batch_size=1_000,
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE transparency_orglog AS l SET published_size = w.size "
            "FROM unnest(%s::bigint[], %s::bigint[]) AS w(org_id, size) "
            "WHERE l.org_id = w.org_id",
            _columns(rows),
        )
