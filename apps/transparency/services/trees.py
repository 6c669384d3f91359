"""Extending org trees from the mirror's committed entries (transparency.md §3).

The push path is untouched: org trees are extended from the mirror's committed entries
(``org_trees_extend``), which each epoch run does first; each chunk commits the nodes with
the tree size they complete.
"""

from __future__ import annotations

from django.db import connection, transaction

from apps.receipts.models import MirrorEntry, MirrorHead
from apps.transparency.bulk import org_nodes_insert, org_trees_update
from apps.transparency.models import OrgLog
from apps.transparency.services.scope import every_org
from apps.transparency.storage import MissingNode, org_node_reader
from apps.transparency.tree.merkle import append_hashes, frontier_nodes, leaf_hash, root_of_frontier

EXTEND_CHUNK = 10_000  # entries per org per transaction
ORGS_PER_BATCH = 500


def org_log_ensure(*, org_pk: int) -> OrgLog:
    log, _ = OrgLog.objects.get_or_create(org_id=org_pk)
    return log


def _new_entries(starts: dict[int, int], limit: int) -> dict[int, list[bytes]]:
    """Per org, the leaf hashes of its entries ``start+1 …`` (at most ``limit``), stopping
    at the first ``seq`` not committed yet (the next run takes it)."""
    rows: list[tuple[int, int, str]]
    if connection.vendor == "postgresql":
        pairs = sorted(starts.items())
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT e.org_id, e.seq, e.action_hash "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS w(org_id, size) "
                "JOIN receipts_mirrorentry e ON e.org_id = w.org_id "
                "AND e.seq > w.size AND e.seq <= w.size + %s ORDER BY e.org_id, e.seq",
                [[org for org, _ in pairs], [size for _, size in pairs], limit],
            )
            rows = list(cursor.fetchall())
    else:
        rows = [
            (org_pk, seq, action_hash)
            for org_pk, start in sorted(starts.items())
            for seq, action_hash in MirrorEntry.objects.filter(
                org_id=org_pk, seq__gt=start, seq__lte=start + limit
            )
            .order_by("seq")
            .values_list("seq", "action_hash")
        ]
    found: dict[int, list[bytes]] = {}
    for org_pk, seq, action_hash in rows:
        hashes = found.setdefault(org_pk, [])
        if seq == starts[org_pk] + len(hashes) + 1:
            hashes.append(leaf_hash(bytes.fromhex(action_hash)))
    return found


def _frontiers(starts: dict[int, int]) -> dict[int, dict[tuple[int, int], bytes]]:
    """Per org, the stored perfect subtrees its next leaves hang on."""
    wanted = [
        (org_pk, level, index)
        for org_pk, start in starts.items()
        for level, index in frontier_nodes(start)
    ]
    found: dict[int, dict[tuple[int, int], bytes]] = {org_pk: {} for org_pk in starts}
    if not wanted:
        return found
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n.org_id, n.level, n.index, n.hash FROM "
                "unnest(%s::bigint[], %s::smallint[], %s::bigint[]) AS w(org_id, level, index) "
                "JOIN transparency_orgtreenode n ON n.org_id = w.org_id "
                "AND n.level = w.level AND n.index = w.index",
                [[w[0] for w in wanted], [w[1] for w in wanted], [w[2] for w in wanted]],
            )
            rows = list(cursor.fetchall())
    else:
        rows = [
            (org_pk, level, index, value)
            for org_pk, start in starts.items()
            for (level, index), value in org_node_reader(org_pk)(set(frontier_nodes(start))).items()
        ]
    for org_pk, level, index, value in rows:
        found[org_pk][(level, index)] = bytes(value)
    for org_pk, start in starts.items():
        if len(found[org_pk]) != len(frontier_nodes(start)):
            raise MissingNode(f"org {org_pk}: a frontier node of its stored tree is missing")
    return found


def _extend_batch(org_pks: list[int]) -> tuple[int, list[int]]:
    """One transaction: extend these orgs' trees by at most EXTEND_CHUNK entries each.
    Returns the entries added and the orgs that may have more."""
    with transaction.atomic():
        logs = {
            log.org_id: log
            for log in OrgLog.objects.select_for_update().filter(org_id__in=org_pks).order_by("pk")
        }
        starts = {org_pk: log.tree_size for org_pk, log in logs.items()}
        entries = _new_entries(starts, EXTEND_CHUNK)
        if not entries:
            return 0, []
        frontiers = _frontiers({org_pk: starts[org_pk] for org_pk in entries})
        nodes: list[tuple[int, int, int, bytes]] = []
        trees: list[tuple[int, int, bytes]] = []
        for org_pk, hashes in entries.items():
            created, edge, size = append_hashes(starts[org_pk], frontiers[org_pk], hashes)
            nodes.extend((org_pk, level, index, value) for level, index, value in created)
            trees.append((org_pk, size, root_of_frontier(edge)))
        org_nodes_insert(nodes)
        org_trees_update(trees)
        more = [org_pk for org_pk, hashes in entries.items() if len(hashes) == EXTEND_CHUNK]
        return sum(len(hashes) for hashes in entries.values()), more


def org_tree_extend(*, org_pk: int) -> int:
    """Append the org's committed mirror entries past its stored tree size, in ``seq``
    order; each chunk commits with the size it completes. Returns the entries added."""
    org_log_ensure(org_pk=org_pk)
    added, more = _extend_batch([org_pk])
    while more:
        step, more = _extend_batch(more)
        added += step
    return added


def org_trees_extend() -> int:
    """Extend every org tree that lags its mirror head, ORGS_PER_BATCH orgs a transaction
    (each batch commits the nodes with the sizes they complete). Returns the entries added."""
    with every_org():
        heads = dict(MirrorHead.objects.filter(size__gt=0).values_list("org_id", "size"))
        stored = dict(OrgLog.objects.values_list("org_id", "tree_size"))
        for org_pk in heads.keys() - stored.keys():
            org_log_ensure(org_pk=org_pk)
        lagging = sorted(org_pk for org_pk, size in heads.items() if size > stored.get(org_pk, 0))
        added = 0
        while lagging:
            batch, lagging = lagging[:ORGS_PER_BATCH], lagging[ORGS_PER_BATCH:]
            step, more = _extend_batch(batch)
            added += step
            lagging = sorted(set(lagging) | set(more))
        return added
