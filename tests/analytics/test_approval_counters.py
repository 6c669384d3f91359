"""The dashboard's approval counters: what the approval pages say, from the approvals'
rollups (tests/approvals/test_approval_rollups.py recounts those), and a read that never
scans the org's mirror or approvals, checked on plans PostgreSQL actually runs."""

from __future__ import annotations

import re
from datetime import timedelta
from http import HTTPStatus

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.analytics.selectors import analytics_counters
from apps.approvals.models import Approval
from apps.approvals.services import approvals_sweep
from tests.approvals.model_factories import ApprovalFactory
from tests.approvals.test_approval_rollups import open_approval, suspended_content, vote


def counters(org) -> dict[str, object]:
    return {c.key: c for c in analytics_counters(org=org)}


def page_statuses(sdk_client, approvals: list[Approval]) -> list[str]:
    """Each approval's status as its page (``GET /v1/approvals/{action_hash}``) shows it."""
    statuses = []
    for approval in approvals:
        response = sdk_client.get(f"/v1/approvals/{approval.action_hash}")
        assert response.status_code == HTTPStatus.OK
        statuses.append(response.json()["status"])
    return statuses


def console_queue(org) -> str:
    """The approval queue of the console's org dashboard, as a viewer sees it."""
    viewer = Client()
    assert viewer.login(username="acme-viewer", password="pw-viewer")
    page = viewer.get(f"/admin/tenancy/org/{org.pk}/dashboard/").content.decode()
    return page[page.index("<h2>Approval queue</h2>") : page.index("<h2>Active policy</h2>")]


def test_the_approval_counters_say_what_the_pages_say_before_and_after_the_sweep(
    cast, approvers, sdk_client
) -> None:
    alice, bob, _ = approvers
    waiting, approved, rejected = (suspended_content() for _ in range(3))
    past = "2020-01-01T00:00:00Z"
    overdue = [
        suspended_content(expires_at=past, on_timeout="deny"),
        suspended_content(expires_at=past),
        suspended_content(expires_at=past, on_timeout="escalate"),
    ]
    approvals = [open_approval(cast.acme, c) for c in (waiting, approved, rejected, *overdue)]
    vote(cast.acme, alice, approved)
    vote(cast.acme, bob, rejected, "rejected")

    for sweep in (False, True):
        if sweep:
            assert approvals_sweep() == 3
        shown = page_statuses(sdk_client, approvals)
        assert shown == ["pending", "approved", "rejected", "rejected", "expired", "pending"]
        stats = counters(cast.acme)
        assert stats["approvals_pending"].value == shown.count("pending") == 2
        assert stats["approvals_approved"].value == shown.count("approved") == 1
        assert stats["approvals_rejected"].value == shown.count("rejected") == 2
        assert stats["approvals_rejected"].label == "Approvals rejected (1 more expired undecided)"
        assert stats["approvals_pending"].spark[-1] == 6  # opened today
        queue = console_queue(cast.acme)
        assert [a.approval_id in queue for a in approvals] == [s == "pending" for s in shown]


def test_the_time_to_decision_is_the_exact_average_of_the_last_30_days(cast) -> None:
    now = timezone.now()
    for age, resolved in [(60, 0), (181, 0), (7, 45 * 86400)]:
        resolved_at = now - timedelta(seconds=resolved)
        ApprovalFactory(
            org=cast.acme, status="approved", resolved_at=resolved_at,
            created_at=resolved_at - timedelta(seconds=age, microseconds=500_000),
        )  # fmt: skip
    stat = counters(cast.acme)["approval_median_seconds"]
    assert stat.label == "Average time to decision (30 days)"
    assert stat.value == 121  # (60.5 s + 181.5 s) / 2: the decision 45 days ago is outside
    assert stat.display == "2 min"
    assert stat.spark[-1] == 2
    assert counters(cast.acme)["approvals_approved"].value == 3


# --- The whole read, on an org of 200,000 entries and 30,000 approvals among 3,000 orgs -----

TAIL, BACKLOG, QUEUE = 25, 10, 50
APPROVALS = 30_000
APPROVAL_TABLE = "approvals_approval"


def _bulk_approvals(org_id: int) -> None:
    """``APPROVALS`` approvals for the org over 90 days (most settled; some pending, of
    them half escalated long ago and flagged) and ``BACKLOG`` overdue ones the sweep has
    not seen; one for each other org. Inserted by SQL: the trigger keeps the rollups."""
    columns = (
        "org_id, approval_id, action_hash, status, threshold, roster, ticket_hash, rule_id, "
        "workflow, account, producer_keys, context, suspended_content, approved_count, "
        "expires_at, on_timeout, flag, access_token_digest, routing_hint, provisional, "
        "session_id, local_decision, created_at, resolved_at"
    )
    status = (
        "CASE WHEN n %% 10 < 6 THEN 'approved' WHEN n %% 10 < 8 THEN 'rejected' "
        "WHEN n %% 10 = 8 THEN 'expired' ELSE 'pending' END"
    )
    escalated = "n %% 20 = 9"  # half the pending ones: escalated, past their expiry, flagged
    opened = "now() - (n %% 90) * interval '1 day' - interval '1 hour'"
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # the bulk load, not what is measured
        cursor.execute(
            f"""
            INSERT INTO {APPROVAL_TABLE} ({columns})
            SELECT %s, 'apr_bulk_' || n, md5(n::text) || md5((n + 1)::text), {status}, 1,
                   '[]', '', 'bulk', '', '', '[]', '{{}}', '', 0,
                   CASE WHEN {escalated} THEN {opened} + interval '10 minutes'
                        ELSE now() + interval '30 days' END,
                   CASE WHEN {escalated} THEN 'escalate' ELSE '' END,
                   CASE WHEN {escalated} THEN 'escalated' ELSE '' END,
                   '', '', false, '', '', {opened},
                   CASE WHEN n %% 10 < 9 THEN {opened} + (n %% 3600) * interval '1 second' END
            FROM generate_series(1, %s) AS n
            """,  # noqa: S608
            [org_id, APPROVALS],
        )
        cursor.execute(
            f"""
            INSERT INTO {APPROVAL_TABLE} ({columns})
            SELECT %s, 'apr_late_' || n, md5('late' || n), 'pending', 1, '[]', '', 'bulk', '',
                   '', '[]', '{{}}', '', 0, now() - interval '1 minute', 'deny', '', '', '',
                   false, '', '', now() - interval '1 hour', NULL
            FROM generate_series(1, %s) AS n
            """,  # noqa: S608
            [org_id, BACKLOG],
        )
        cursor.execute(
            f"""
            INSERT INTO {APPROVAL_TABLE} ({columns})
            SELECT id, 'apr_other_' || id, md5('other' || id), 'pending', 1, '[]', '', '', '',
                   '', '[]', '{{}}', '', 0, NULL, '', '', '', '', false, '', '', now(), NULL
            FROM tenancy_org WHERE slug LIKE 'bulk-%%'
            """  # noqa: S608
        )


def _rows_visited(nodes: list[dict], table: str) -> int:
    """Rows of ``table`` the plan's scans read (kept or filtered out), over every loop."""
    visited = 0
    for node in nodes:
        if node.get("Relation Name") == table:
            read = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            read += node.get("Rows Removed by Index Recheck", 0)
            visited += read * node.get("Actual Loops", 1)
    return visited


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_counters_and_the_org_dashboard_never_scan_the_orgs_mirror_or_approvals(
    cast,
) -> None:
    """Every statement the counters and the console's org dashboard run against the mirror
    or the approvals, replayed under the generic plan and run: no sequential scan of
    either, and no more rows read than the receipts not folded yet, the sweep's backlog and
    the queue's page, whatever the org's size."""
    from apps.analytics.services import rollups_fold_org
    from apps.tenancy.org_context import activate_all_orgs
    from tests.analytics.test_rollups import bulk_mirror, bulk_orgs
    from tests.receipts.test_append_plans import ENTRY_TABLE, _analyze, _generic_plan, _scans

    activate_all_orgs()
    entries = 200_000
    bulk_mirror(cast.acme.pk, entries)
    bulk_orgs(3_000)
    _bulk_approvals(cast.acme.pk)
    rollups_fold_org(org_id=cast.acme.pk, batch=entries - TAIL)
    _analyze(
        ENTRY_TABLE, APPROVAL_TABLE, "approvals_approvalrollup", "analytics_dailyrollup",
        "analytics_rollupcursor", "tenancy_org",
    )  # fmt: skip

    statements: list[tuple[str, list[object]]] = []

    def capture(execute, sql, params, many, context):
        statements.append((sql, list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        stats = {c.key: c.value for c in analytics_counters(org=cast.acme)}
        viewer = Client()
        assert viewer.login(username="acme-viewer", password="pw-viewer")
        page = viewer.get(f"/admin/tenancy/org/{cast.acme.pk}/dashboard/")
    assert page.status_code == HTTPStatus.OK
    activate_all_orgs()

    # The figures, against a recount of the rows (the tail's and the backlog's included).
    assert stats["receipts_total"] == entries
    assert stats["receipts_l1"] == entries // 7
    rows = Approval.objects.filter(org=cast.acme)
    assert stats["approvals_approved"] == rows.filter(status="approved").count()
    assert stats["approvals_rejected"] == rows.filter(status="rejected").count() + BACKLOG
    assert stats["approvals_pending"] == rows.filter(status="pending").count() - BACKLOG
    assert f"{stats['approvals_pending']:,}" in page.content.decode()

    watched = {ENTRY_TABLE: TAIL, APPROVAL_TABLE: BACKLOG + QUEUE}
    checked = {table: 0 for table in watched}
    for sql, params in statements:
        for table, most in watched.items():
            if not re.search(rf"\b{table}\b", sql):
                continue
            nodes = _generic_plan(sql, params, analyze=True)
            scans = _scans(nodes, table)
            assert scans, (sql, nodes)
            assert all(node["Node Type"] != "Seq Scan" for node in scans), (sql, nodes)
            assert _rows_visited(nodes, table) <= most, (sql, nodes)
            checked[table] += 1
    # The tail, the backlog (by the counters and by the page's own counters) and the queue.
    assert checked[ENTRY_TABLE] >= 2, statements
    assert checked[APPROVAL_TABLE] >= 3, statements
