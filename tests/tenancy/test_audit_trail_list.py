"""The console's org audit trail reads a bounded number of the org's audit rows per page,
whatever the trail's length: a page is a range of the (org, at) index, and its filters
offer fixed vocabularies (kind, via) instead of the values found in the org's rows."""

from __future__ import annotations

import json
import re
from http import HTTPStatus

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.tenancy.audit_trail import ACTOR_VIAS
from apps.tenancy.models import OrgAuditEvent
from apps.tenancy.org_context import activate_all_orgs, activate_orgs
from tests.receipts.test_append_plans import _analyze

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

EVENTS = 20_000
TABLE = OrgAuditEvent._meta.db_table
LIST = "/admin/tenancy/orgauditevent/"
# A page (100 rows and the one past it), or a filter's window of rows looked through.
MOST_ROWS_VISITED = 2_500


def _fill(org_id: int) -> None:
    """EVENTS audit rows for the org, one a second up to now, the ways in taken in turn."""
    vias = "ARRAY[" + ", ".join(f"'{via}'" for via in ACTOR_VIAS) + "]"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (org_id, at, kind, summary, detail, via, actor) "  # noqa: S608
            "SELECT %s, now() - (%s - n) * interval '1 second', 'api_key.issued', "
            f"'row ' || n, '{{}}'::jsonb, ({vias})[1 + n %% {len(ACTOR_VIAS)}], 'bulk' "
            "FROM generate_series(1, %s) AS n",
            [org_id, EVENTS, EVENTS],
        )
    _analyze(TABLE)


def _rows_visited(sql: str) -> int:
    """Rows of the audit table ``sql`` (as sent, parameters inlined) visits, by EXPLAIN
    ANALYZE."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    stack, visited = [plan[0]["Plan"]], 0
    while stack:
        node = stack.pop()
        if node.get("Relation Name") == TABLE:
            visited += node["Actual Rows"] * node.get("Actual Loops", 1)
        stack.extend(node.get("Plans", []))
    return visited


def owner() -> Client:
    """The org's owner in the console: the org's rows only (its org context)."""
    client = Client()
    assert client.login(username="acme-owner", password="pw-owner")
    return client


def _summaries(answer) -> list[str]:
    assert answer.status_code == HTTPStatus.OK, answer
    return re.findall(r">row (\d+)<", answer.content.decode())


def test_each_page_and_filter_of_a_long_trail_reads_a_bounded_number_of_rows(cast) -> None:
    activate_all_orgs()
    _fill(cast.acme.pk)
    client = owner()
    for what, params in [
        ("first page", {}),
        ("by way in", {"via": "task"}),
        ("by kind", {"kind__exact": "api_key.issued"}),
    ]:
        with CaptureQueriesContext(connection) as captured:
            answer = client.get(LIST, {"org": cast.acme.pk, **params})
        assert answer.status_code == HTTPStatus.OK, what
        activate_orgs([cast.acme.pk])  # replayed in the request's own org context
        for query in captured.captured_queries:
            sql = query["sql"]
            if TABLE not in sql or not sql.lstrip().upper().startswith("SELECT"):
                continue
            assert not re.search(r"\b(COUNT\s*\(|DISTINCT\b)", sql, re.IGNORECASE), (what, sql)
            assert _rows_visited(sql) <= MOST_ROWS_VISITED, (what, sql)
        activate_all_orgs()


def test_the_way_in_filter_offers_every_way_and_shows_only_its_rows(cast) -> None:
    activate_all_orgs()
    _fill(cast.acme.pk)
    client = owner()
    page = client.get(LIST, {"org": cast.acme.pk}).content.decode()
    for via in ACTOR_VIAS:
        assert f"via={via}" in page, via
    shown = _summaries(client.get(LIST, {"org": cast.acme.pk, "via": "task"}))
    assert shown, "no row shown"
    # Row n was made via ACTOR_VIAS[n % 4] (_fill).
    assert all(int(n) % len(ACTOR_VIAS) == ACTOR_VIAS.index("task") for n in shown), shown
