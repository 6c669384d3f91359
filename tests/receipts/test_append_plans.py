"""Every statement of the append reads by an index, whatever the plan cache does.

The append's statements are prepared once per connection; after five executions
PostgreSQL may switch to a generic plan that knows none of the parameter values. A generic
plan that reads the org's entries through an index on the org alone makes every push cost
O(entries of the org). These tests force the generic plan on an org of thousands of
entries and refuse any plan that scans the entry table or reads it by the org alone.
"""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection

from apps.receipts.append_sql import (
    _ADVANCE_HEAD,
    _LOCK_HEAD,
    _RELATED,
    ENTRY_TABLE,
    HEAD_TABLE,
)
from apps.tenancy.org_context import activate_all_orgs

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ENTRIES = 20_000
ORGS = 3_000
# The indexes that find an entry by what the append looks up, never by the org alone.
LOOKUP_INDEXES = {"mirror_entry_org_hash", "mirror_entry_session"}


def _fill(org_id: int) -> None:
    """ENTRIES entries for one org, as a long-lived org has: sessions of ten receipts."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {ENTRY_TABLE} (
                org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level,
                claimed_trust_level, supersedes_action_hash, superseded_by, prev_chain_hash,
                chain_hash, received_at, session_id, session_seq, link_hash, operator_key,
                agent_identity, workflow, verb, decision_path, rule_id)
            SELECT %s, n, md5(n::text) || md5((n + 1)::text), '{{}}', '', 'action', 'L0', '',
                   '', '', '', '', now(), 's' || (n / 10), n %% 10, '', '', '', '', '', '', ''
            FROM generate_series(1, %s) AS n
            """,  # noqa: S608
            [org_id, ENTRIES],
        )
        # Many orgs, each with its head row, as a busy deployment has.
        cursor.execute(
            "INSERT INTO tenancy_org (slug, name, plan, created_at) "
            "SELECT 'bulk-' || n, 'bulk', 'free', now() FROM generate_series(1, %s) AS n",
            [ORGS],
        )
        cursor.execute(
            f"INSERT INTO {HEAD_TABLE} (org_id, size, head, month, month_count) "  # noqa: S608
            "SELECT id, 0, '', '', 0 FROM tenancy_org ON CONFLICT DO NOTHING"
        )
        cursor.execute(f"ANALYZE {ENTRY_TABLE}")
        cursor.execute(f"ANALYZE {HEAD_TABLE}")


def _generic_plan(sql: str, params: list[object]) -> list[dict]:
    """The plan nodes PostgreSQL uses for ``sql`` once it has switched to a generic plan."""
    placeholders = iter(range(1, 100))
    numbered = re.sub(r"%s", lambda _: f"${next(placeholders)}", sql)
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute(f"PREPARE related_probe AS {numbered}")
            values = ", ".join(["%s"] * len(params))
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE related_probe({values})", params)
            plan = cursor.fetchone()[0]
        finally:
            cursor.execute("DEALLOCATE ALL")
            cursor.execute("RESET plan_cache_mode")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    nodes, stack = [], [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


def _index_names(nodes: list[dict]) -> set[str]:
    return {node["Index Name"] for node in nodes if "Index Name" in node}


def _scans(nodes: list[dict], table: str) -> list[dict]:
    return [node for node in nodes if node.get("Relation Name") == table]


def test_the_related_entries_lookup_reads_only_by_hash_and_session(cast) -> None:
    activate_all_orgs()
    _fill(cast.acme.pk)
    params = [cast.acme.pk, "ab" * 32, cast.acme.pk, "s7", 5, 4, "ab" * 32]
    nodes = _generic_plan(_RELATED, params)
    scans = _scans(nodes, ENTRY_TABLE)
    assert scans, nodes
    assert [node for node in scans if node["Node Type"] == "Seq Scan"] == []
    indexes = _index_names(nodes)
    assert indexes, nodes
    assert indexes <= LOOKUP_INDEXES, [(n["Node Type"], n.get("Index Name")) for n in nodes]


def test_the_head_is_locked_and_advanced_by_its_primary_key(cast) -> None:
    activate_all_orgs()
    _fill(cast.acme.pk)
    for sql, params in (
        (_LOCK_HEAD + " FOR UPDATE", [cast.acme.pk]),
        (_ADVANCE_HEAD, [1, "ab" * 32, "2026-11", 1, cast.acme.pk]),
    ):
        nodes = _generic_plan(sql, params)
        assert [node for node in _scans(nodes, HEAD_TABLE) if node["Node Type"] == "Seq Scan"] == []
        assert _index_names(nodes) == {f"{HEAD_TABLE}_pkey"}, nodes
