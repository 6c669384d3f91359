"""Every statement of the append reads by an index, whatever the plan cache does.

The append's statements are prepared once per connection; after five executions
PostgreSQL may switch to a generic plan that knows none of the parameter values, and keeps
it for the connection's life. A generic plan that reads the org's entries through an index
on the org alone, or matches only part of a lookup in the index and filters the rest, makes
every push cost O(entries of the org, or of the session). These tests force the generic
plan, as the append transaction plans it (sequential scans off), on an org of thousands of
entries with statistics, and on tables that never had statistics (a new deployment,
autovacuum behind), and refuse any plan that scans a table, reads it by the org alone, or
leaves a lookup column out of the index condition.
"""

from __future__ import annotations

import itertools
import json
import re

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from apps.common.prepared import PipelinedStatement
from apps.receipts.append_sql import (
    _ADVANCE_HEAD,
    _LOCK_HEAD,
    _RELATED,
    _RELATED_MANY,
    ENTRY_TABLE,
    HEAD_TABLE,
    related_many_params,
)
from apps.tenancy.org_context import activate_all_orgs
from tests.common.test_prepared import libpq_pipeline  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ENTRIES = 20_000
ORGS = 3_000
# The indexes that find an entry by what the append looks up, never by the org alone.
LOOKUP_INDEXES = {"mirror_entry_org_hash", "mirror_entry_session"}


def _fill(org_id: int, receipt_bytes: int = 2) -> None:
    """ENTRIES entries for one org, as a long-lived org has: sessions of ten receipts
    (each stored receipt ``receipt_bytes`` long; a real one is about 1,300)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {ENTRY_TABLE} (
                org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level,
                claimed_trust_level, supersedes_action_hash, superseded_by, prev_chain_hash,
                chain_hash, received_at, session_id, session_seq, link_hash, operator_key,
                agent_identity, workflow, verb, decision_path, rule_id, tool_name)
            SELECT %s, n, md5(n::text) || md5((n + 1)::text), repeat('x', %s), '', 'action',
                   'L0', '', '', '', '', '', now(), 's' || (n / 10), n %% 10, '', '', '', '',
                   '', '', '', 'tool-' || (n %% 7)
            FROM generate_series(1, %s) AS n
            """,  # noqa: S608
            [org_id, receipt_bytes, ENTRIES],
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
    _analyze(ENTRY_TABLE, HEAD_TABLE)


def _analyze(*tables: str) -> None:
    """ANALYZE as the tables' owner (the application role the tests run as may not)."""
    owner = settings.MIGRATION_DATABASE
    credentials = {
        "dbname": connection.settings_dict["NAME"],
        "user": owner.get("USER"),
        "password": owner.get("PASSWORD"),
        "host": owner.get("HOST"),
        "port": owner.get("PORT"),
    }
    with psycopg.connect(**{k: v for k, v in credentials.items() if v}, autocommit=True) as conn:
        for table in tables:
            conn.execute(f"ANALYZE {table}")


def _generic_plan(sql: str, params: list[object], *, analyze: bool = False) -> list[dict]:
    """The plan nodes PostgreSQL uses for ``sql`` once it has switched to a generic plan
    (with ``analyze``, run: each node says how many rows it actually read)."""
    placeholders = itertools.count(1)
    numbered = re.sub(r"%s", lambda _: f"${next(placeholders)}", sql)
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            cursor.execute(f"PREPARE related_probe AS {numbered}")
            values = ", ".join(["%s"] * len(params))
            options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
            cursor.execute(f"EXPLAIN ({options}) EXECUTE related_probe({values})", params)
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


def _assert_related_reads_by_lookup(nodes: list[dict], table: str, indexes: set[str]) -> None:
    """Each branch of the related-entries read is an index scan on one lookup index whose
    index condition holds every looked-up column (nothing of the lookup left to a filter)."""
    scans = _scans(nodes, table)
    assert len(scans) == 2, nodes
    assert {node["Node Type"] for node in scans} <= {"Index Scan", "Bitmap Heap Scan"}, nodes
    assert _index_names(nodes) <= indexes, [(n["Node Type"], n.get("Index Name")) for n in nodes]
    conditions = [node.get("Index Cond", "") for node in nodes if node.get("Index Name") in indexes]
    by_hash = [c for c in conditions if "action_hash" in c]
    by_session = [c for c in conditions if "session_id" in c]
    assert len(by_hash) == 1, conditions
    assert "org_id" in by_hash[0], conditions
    assert len(by_session) == 1, conditions
    assert "org_id" in by_session[0], conditions
    assert "session_seq" in by_session[0], conditions


def test_the_related_entries_lookup_reads_only_by_hash_and_session(cast) -> None:
    activate_all_orgs()
    _fill(cast.acme.pk)
    params = [cast.acme.pk, "ab" * 32, cast.acme.pk, "s7", 4, 5, "ab" * 32]
    nodes = _generic_plan(_RELATED, params)
    _assert_related_reads_by_lookup(nodes, ENTRY_TABLE, LOOKUP_INDEXES)


def _copy_without_statistics(table: str) -> str:
    """A temporary copy of ``table`` with its indexes, never analysed (autovacuum does not
    analyse temporary tables), as the entry table of a new deployment is."""
    copy = f"nostats_{table}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {copy} (LIKE {table} INCLUDING INDEXES)")
    return copy


def test_the_related_read_is_a_lookup_on_a_table_without_statistics(cast) -> None:
    """The case a benchmark on a new database met: one long session, no statistics. A
    generic plan matched ``session_seq IN (...)`` as a filter on the session's index
    entries, so each push read its whole session."""
    entries = _copy_without_statistics(ENTRY_TABLE)
    try:
        _check_lookups_without_statistics(entries)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {entries}")


def _check_lookups_without_statistics(entries: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {entries} (
                id, org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level,
                claimed_trust_level, supersedes_action_hash, superseded_by, prev_chain_hash,
                chain_hash, received_at, session_id, session_seq, link_hash, operator_key,
                agent_identity, workflow, verb, decision_path, rule_id, tool_name)
            SELECT n, 1, n, md5(n::text) || md5((n + 1)::text), repeat('x', 1200), '',
                   'action', 'L0', '', '', '', '', '', now(), 'one-long-session', n, '', '',
                   '', '', '', '', '', ''
            FROM generate_series(1, 5000) AS n
            """  # noqa: S608
        )
    related = _RELATED.replace(ENTRY_TABLE, entries)
    nodes = _generic_plan(related, [1, "ab" * 32, 1, "one-long-session", 4, 5, "ab" * 32])
    copied_indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    assert all(name.startswith(f"{entries}_") for name in copied_indexes), copied_indexes
    lookup = {name for name in copied_indexes if "action_hash" in name or "session" in name}
    _assert_related_reads_by_lookup(nodes, entries, lookup)


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


def test_a_batchs_related_entries_read_reads_by_the_lookup_indexes(cast) -> None:
    """The batch's one read finds a batch of receipts' entries through the lookup indexes
    (its generic plan, in an org of entries of a real receipt's size), never by the org
    alone."""
    activate_all_orgs()
    _fill(cast.acme.pk, receipt_bytes=1300)
    receipts = [(f"{n:064x}", f"s{n // 10}", n % 10 + 1) for n in range(100)]
    nodes = _generic_plan(_RELATED_MANY, related_many_params(cast.acme.pk, receipts))
    scans = _scans(nodes, ENTRY_TABLE)
    assert len(scans) == 2, nodes
    assert {node["Node Type"] for node in scans} <= {"Index Scan", "Bitmap Heap Scan"}, nodes
    assert _index_names(nodes) == LOOKUP_INDEXES, nodes
    conditions = " ".join(node.get("Index Cond", "") for node in nodes)
    assert "action_hash" in conditions, conditions
    assert "session_seq" in conditions, conditions


@pytest.mark.usefixtures("libpq_pipeline")  # it reads the libpq mode's statements
def test_the_statements_are_planned_anew_each_time_the_connections_appends_double(
    cast, monkeypatch
) -> None:
    """No generic plan made on a nearly empty table serves a connection for its life: each
    statement is prepared (and planned) anew when its count of append transactions doubles
    (here from 1 on: 1, 2, 4, 8...)."""
    from apps.receipts import append_sql
    from apps.receipts.services import receipt_append
    from tests.receipts.factories import Agent
    from tests.receipts.test_append_transaction import verified

    monkeypatch.setattr(append_sql, "_appends_by_connection", append_sql.WeakKeyDictionary())
    monkeypatch.setattr(append_sql, "REPLAN_FROM", 1)
    prepared = []
    real = PipelinedStatement.execute

    def recording(self, query, params, **options):
        if str(query).startswith(_RELATED):
            prepared.append(str(query).removeprefix(_RELATED))
        return real(self, query, params, **options)

    monkeypatch.setattr(PipelinedStatement, "execute", recording)
    agent = Agent()
    for _ in range(8):
        receipt_append(org=cast.acme, **vars(verified(agent.receipt())))
    # The org's first append reads twice (before and after creating its head row).
    assert prepared == [" /* plan 1 */", " /* plan 1 */", " /* plan 2 */", " /* plan 2 */",
                        " /* plan 3 */", " /* plan 3 */", " /* plan 3 */", " /* plan 3 */",
                        " /* plan 4 */"]  # fmt: skip


@pytest.mark.usefixtures("libpq_pipeline")
def test_the_append_transaction_uses_generic_plans(cast, monkeypatch) -> None:
    """A custom plan would estimate with the org's own statistics (one row for an org new
    at the last ANALYZE, whose lookups then tie with a read of the whole org): the
    application's connections run prepared statements on their generic plans, set when
    the connection opens (no statement of the append's)."""
    from apps.receipts.services import receipt_append
    from tests.receipts.factories import Agent
    from tests.receipts.test_append_transaction import verified

    assert (
        "plan_cache_mode=force_generic_plan" in settings.DATABASES["default"]["OPTIONS"]["options"]
    )
    sent = []
    real = PipelinedStatement.execute

    def recording(self, query, params, **options):
        sent.append(str(query))
        return real(self, query, params, **options)

    receipt_append(org=cast.acme, **vars(verified(Agent().receipt())))
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
    monkeypatch.setattr(PipelinedStatement, "execute", recording)
    receipt_append(org=cast.acme, **vars(verified(Agent().receipt())))
    assert sent
    assert not any("plan_cache_mode" in query for query in sent)
