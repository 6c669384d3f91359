"""The dashboard's receipt counters come from per-org daily rollups plus the entries not
folded yet, and are exact at every read: each test recounts from the mirror's rows."""

from __future__ import annotations

import threading
from datetime import date, timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from apps.analytics.models import DailyRollup, RollupCursor
from apps.analytics.selectors import analytics_counters, receipt_days
from apps.analytics.services import rollups_catch_up, rollups_fold_org
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_head_get
from tests.approvals.conftest import suspended_receipt
from tests.receipts.factories import Agent
from tests.receipts.model_factories import MirrorEntryFactory


def recount(org) -> dict[date, tuple[int, int, int]]:
    """Per day, from the rows themselves: receipts, L1, supersedes."""
    rows = (
        MirrorEntry.objects.filter(org=org)
        .annotate(day=TruncDate("received_at"))
        .values("day")
        .annotate(
            n=Count("id"),
            l1=Count("id", filter=Q(trust_level="L1")),
            sup=Count("id", filter=~Q(supersedes_action_hash="")),
        )
    )
    return {row["day"]: (row["n"], row["l1"], row["sup"]) for row in rows}


def read(org) -> dict[date, tuple[int, int, int]]:
    days = receipt_days(org=org, upto=mirror_head_get(org=org).size)
    return {day: (c.receipts, c.l1, c.supersedes) for day, c in days.items() if c.receipts}


def folded(org) -> dict[date, tuple[int, int, int]]:
    return {r.day: (r.receipts, r.l1, r.supersedes) for r in DailyRollup.objects.filter(org=org)}


def rolled_back(work) -> None:
    """``work()`` in a transaction that then fails (a worker dying before its commit)."""

    class Died(Exception):
        pass

    try:
        with transaction.atomic():
            work()
            raise Died
    except Died:
        pass


def mirror_rows_visited(sql: str) -> int:
    """Rows of the mirror table that ``sql`` (a captured statement, parameters inlined)
    actually visits, by EXPLAIN ANALYZE."""
    import json

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    stack, visited = [plan[0]["Plan"]], 0
    while stack:
        node = stack.pop()
        if node.get("Relation Name") == "receipts_mirrorentry":
            visited += node["Actual Rows"] * node.get("Actual Loops", 1)
        stack.extend(node.get("Plans", []))
    return visited


def bulk_mirror(org_id: int, entries: int) -> None:
    """``entries`` mirror rows for the org by one INSERT (every 7th L1, received over the
    last 90 days), and its head row at that size: a bulk load, not the append."""
    from tests.receipts.test_append_plans import ENTRY_TABLE

    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # the bulk load, not what is measured
        cursor.execute(
            f"""
            INSERT INTO {ENTRY_TABLE} (
                org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level,
                claimed_trust_level, supersedes_action_hash, superseded_by, prev_chain_hash,
                chain_hash, received_at, session_id, session_seq, link_hash, operator_key,
                agent_identity, workflow, verb, decision_path, rule_id)
            SELECT %s, n, md5(n::text) || md5((n + 1)::text), 'x', '', 'action',
                   CASE WHEN n %% 7 = 0 THEN 'L1' ELSE 'L0' END, '', '', '', '', '',
                   now() - (n %% 90) * interval '1 day', '', NULL, '', '', '', '', '', '', ''
            FROM generate_series(1, %s) AS n
            """,  # noqa: S608
            [org_id, entries],
        )
        cursor.execute(
            "INSERT INTO receipts_mirrorhead (org_id, size, head, month, month_count) "
            "VALUES (%s, %s, '', '', 0) ON CONFLICT (org_id) DO UPDATE SET size = %s",
            [org_id, entries, entries],
        )


def bulk_orgs(count: int) -> None:
    """``count`` more orgs (slugs ``bulk-1`` ...), so an org is one among thousands."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tenancy_org (slug, name, plan, created_at) "
            "SELECT 'bulk-' || n, 'bulk', 'free', now() FROM generate_series(1, %s) AS n",
            [count],
        )


def counter(org, key: str):
    return next(c for c in analytics_counters(org=org) if c.key == key).value


def test_counters_are_exact_before_during_and_after_folding(cast, push, approvers) -> None:
    agent = Agent()
    old = timezone.now() - timedelta(days=3)
    for _ in range(2):
        MirrorEntryFactory(org=cast.acme, received_at=old)
    for _ in range(3):
        assert push(agent.receipt()).status_code == 201
    assert read(cast.acme) == recount(cast.acme)  # nothing folded yet: all from the tail
    assert rollups_fold_org(org_id=cast.acme.pk, batch=3) == 3  # part of it
    assert read(cast.acme) == recount(cast.acme)
    suspended = suspended_receipt(agent)
    assert push(suspended).status_code == 201
    l1 = agent.approve_l1(suspended, approvers[0].key)
    assert push(l1, supersedes=suspended["content"]["action_hash"]).status_code == 201
    assert read(cast.acme) == recount(cast.acme)
    assert rollups_catch_up() == 4
    assert rollups_catch_up() == 0
    assert folded(cast.acme) == recount(cast.acme) == read(cast.acme)
    assert RollupCursor.objects.get(org=cast.acme).seq == 7
    assert counter(cast.acme, "receipts_l1") == 1
    assert counter(cast.acme, "supersedes") == 1


def test_a_fold_that_fails_leaves_rollups_and_cursor_as_they_were(cast, push) -> None:
    for _ in range(4):
        assert push(Agent().receipt()).status_code == 201
    rollups_fold_org(org_id=cast.acme.pk, batch=2)
    before = (folded(cast.acme), RollupCursor.objects.get(org=cast.acme).seq)
    rolled_back(lambda: rollups_fold_org(org_id=cast.acme.pk))
    assert (folded(cast.acme), RollupCursor.objects.get(org=cast.acme).seq) == before
    assert read(cast.acme) == recount(cast.acme)
    rollups_catch_up()
    assert folded(cast.acme) == recount(cast.acme)


def test_a_refused_or_rolled_back_append_is_never_counted(cast, push) -> None:
    assert push(Agent().receipt()).status_code == 201
    tampered = Agent().receipt()
    tampered["content"]["action"]["tool_name"] = "other"
    assert push(tampered).status_code == 409
    rolled_back(lambda: MirrorEntryFactory(org=cast.acme))
    rollups_catch_up()
    assert folded(cast.acme) == recount(cast.acme) == read(cast.acme)
    assert counter(cast.acme, "receipts_total") == 1


def test_other_orgs_rows_never_reach_an_orgs_counters(cast, push, globex_push) -> None:
    assert push(Agent().receipt()).status_code == 201
    assert globex_push(Agent().receipt()).status_code == 201
    assert globex_push(Agent().receipt()).status_code == 201
    rollups_catch_up()
    assert sum(n for n, _, _ in folded(cast.acme).values()) == 1
    assert sum(n for n, _, _ in folded(cast.globex).values()) == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_pushes_and_folds_stay_exact(cast) -> None:
    """Two folding workers and two pushers at once: the cursor lock serializes the folds,
    and every read, during and after, equals the recount."""
    from rest_framework.test import APIClient

    from tests.receipts.conftest import Pusher

    errors: list[BaseException] = []
    stop = threading.Event()

    def pusher() -> None:
        try:
            push = Pusher(APIClient(), cast.acme_key.secret)
            for _ in range(15):
                assert push(Agent().receipt()).status_code == 201
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    def folder() -> None:
        try:
            while not stop.is_set():
                rollups_catch_up(batch=4)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    pushers = [threading.Thread(target=pusher) for _ in range(2)]
    folders = [threading.Thread(target=folder) for _ in range(2)]
    for thread in pushers + folders:
        thread.start()
    for thread in pushers:
        thread.join()
    stop.set()
    for thread in folders:
        thread.join()
    assert not errors, errors
    assert read(cast.acme) == recount(cast.acme)
    rollups_catch_up()
    assert folded(cast.acme) == recount(cast.acme)
    assert sum(n for n, _, _ in folded(cast.acme).values()) == 30


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_counters_read_never_scans_the_orgs_mirror(cast) -> None:
    """On an org of 200,000 entries among 3,000 orgs, with statistics: the rollup read and
    the unfolded tail read by index, under the generic plan, and visit only the tail."""
    from apps.tenancy.org_context import activate_all_orgs
    from tests.receipts.test_append_plans import ENTRY_TABLE, _analyze, _generic_plan, _scans

    activate_all_orgs()
    entries, tail = 200_000, 25
    bulk_mirror(cast.acme.pk, entries)
    bulk_orgs(3_000)
    rollups_fold_org(org_id=cast.acme.pk, batch=entries - tail)
    _analyze(ENTRY_TABLE, "analytics_dailyrollup", "analytics_rollupcursor")

    tail_query = MirrorEntry.objects.filter(
        org_id=cast.acme.pk, seq__gt=entries - tail, seq__lte=entries
    ).values("id")
    sql, params = tail_query.query.sql_with_params()
    nodes = _generic_plan(sql, list(params))
    scans = _scans(nodes, ENTRY_TABLE)
    assert scans, nodes
    assert all(node["Node Type"] != "Seq Scan" for node in scans), nodes
    assert all("seq" in node.get("Index Cond", "") for node in scans if "Index Cond" in node)

    days = receipt_days(org=cast.acme, upto=entries)
    assert sum(c.receipts for c in days.values()) == entries
    assert sum(c.l1 for c in days.values()) == entries // 7

    # Every statement the dashboard's counters run, replayed under EXPLAIN ANALYZE: none
    # visits more of the mirror than the unfolded tail.
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        counters = {c.key: c.value for c in analytics_counters(org=cast.acme)}
    assert counters["receipts_total"] == entries
    assert counters["receipts_l1"] == entries // 7
    touching = [q["sql"] for q in captured.captured_queries if ENTRY_TABLE in q["sql"]]
    assert touching, "the tail is read from the mirror"
    for sql in touching:
        assert mirror_rows_visited(sql) <= tail, sql
