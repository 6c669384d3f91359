"""The console's lists beside the receipts list (the approval queue, the webhook delivery
log, the org audit trail, the background task results) read no more rows than a page or
a window, whatever the size of the org, and never count.

Each test runs the real list requests against ``scale_org`` (tests/scale.py: the big org
of 200,000 entries among 3,000 orgs) with ``bulk_load_lists``'s rows (100,000 more
approvals of every status, 100,000 webhook events delivered over three endpoints, 100,000
audit events and 100,000 task results, beside one of each for every small org), and checks
every statement the request ran: none counts, and each one that reads a list's table does
it without a sequential scan and visits a bounded number of its rows, on its generic plan
(any parameter values) and on its custom one. Each page shows exactly the rows it should,
newest first, and its "Older" and "Newer" links move by a page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Q, QuerySet
from django.test import Client
from django_tasks_db.models import DBTaskResult

from apps.approvals.admin import ApprovalAdmin
from apps.approvals.models import Approval
from apps.events.admin import DeliveryAdmin
from apps.events.models import Delivery, Event, WebhookEndpoint
from apps.tenancy.admin_paging import KeysetAdmin
from apps.tenancy.models import OrgAuditEvent
from apps.tenancy.org_context import activate_all_orgs
from tests.scale import (
    ENTRIES_PER_APPROVAL,
    ENTRY_TABLE,
    SCALE_ENDPOINTS,
    ScaleOrg,
    Statement,
    assert_bounded,
    bulk_load_lists,
    mirror_plans,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

APPROVAL_TABLE = Approval._meta.db_table
DELIVERY_TABLE = Delivery._meta.db_table
EVENT_TABLE = Event._meta.db_table
AUDIT_TABLE = OrgAuditEvent._meta.db_table
TASK_TABLE = DBTaskResult._meta.db_table
PER_PAGE = 50
# A page reads a page and one (the row that says there is more) from each branch; a tie
# on the time is sorted by id within the index's order, which may read a few more.
SLACK = 20
_COUNT = re.compile(r"\bCOUNT\s*\(", re.IGNORECASE)


@pytest.fixture(scope="module")
def lists(scale_org: ScaleOrg, django_db_blocker: Any) -> ScaleOrg:
    with django_db_blocker.unblock():
        bulk_load_lists(scale_org)
    return scale_org


def member(scale: ScaleOrg, role: str = "owner") -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=scale.usernames[role]))
    return client


@contextmanager
def list_reads(*tables: str) -> Iterator[list[Statement]]:
    """Every statement sent meanwhile; those that read ``tables``, with their plans. None
    may count rows."""
    sent: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record), mirror_plans(*tables) as statements:
        yield statements
    assert sent, "no statement ran"
    counting = [sql for sql in sent if _COUNT.search(sql)]
    assert not counting, counting


def shown(answer: Any, changelist: str) -> list[str]:
    """The primary keys of the rows a list page shows, in its order."""
    assert answer.status_code == HTTPStatus.OK, answer
    html = answer.content.decode()
    if 'id="result_list"' not in html:
        return []
    table = html[html.index('id="result_list"') :]
    table = table[: table.index("</table>")]
    keys: list[str] = []
    for key in re.findall(rf'href="{re.escape(changelist)}([^/"]+)/change/', table):
        if key not in keys:
            keys.append(key)
    return keys


def cursor_link(answer: Any, rel: str) -> str:
    found = re.search(rf'href="(\?[^"]*)" rel="{rel}"', answer.content.decode())
    assert found, f"no {rel} link"
    return found.group(1).replace("&amp;", "&")


def newest(rows: QuerySet[Any], keyset: tuple[str, ...], count: int = PER_PAGE) -> list[str]:
    return [str(pk) for pk in rows.order_by(*keyset).values_list("pk", flat=True)[:count]]


def window(rows: QuerySet[Any], keyset: tuple[str, ...], size: int, matching: Q) -> list[str]:
    """What a windowed page shows: those of the ``size`` newest rows that match."""
    pks = newest(rows, keyset, size)
    found = {str(pk) for pk in rows.filter(matching, pk__in=pks).values_list("pk", flat=True)}
    return [pk for pk in pks if pk in found][:PER_PAGE]


def check_list(
    client: Client,
    changelist: str,
    cases: list[tuple[str, dict[str, Any], list[str], int]],
    *tables: str,
) -> dict[str, Any]:
    """Each case's page shows what it should, and every statement of its request reads
    each of ``tables`` boundedly (no more than the case's bound, a table the page read)."""
    answers = {}
    for what, params, expected, bound in cases:
        with list_reads(*tables) as statements:
            answer = client.get(changelist, params)
        assert shown(answer, changelist) == expected, (what, shown(answer, changelist)[:3])
        for table in tables:
            if any(statement.scans(table) for statement in statements):
                assert_bounded(statements, table, rows=bound)
        answers[what] = (answer, statements)
    return answers


def pages_on(
    client: Client, changelist: str, first: Any, rows: QuerySet[Any], keyset: tuple[str, ...],
    bound: int, *tables: str,
) -> None:  # fmt: skip
    """The page after ``first`` (by its Older link) shows the next rows, boundedly; its
    Newer link leads back to ``first``'s rows."""
    with list_reads(*tables) as statements:
        second = client.get(changelist + cursor_link(first, "next"))
    assert shown(second, changelist) == newest(rows, keyset, 2 * PER_PAGE)[PER_PAGE:]
    assert_bounded(statements, tables[0], rows=bound)
    back = client.get(changelist + cursor_link(second, "prev"))
    assert shown(back, changelist) == shown(first, changelist)


# --- The approval queue ----------------------------------------------------------------

APPROVALS = "/admin/approvals/approval/"
APPROVAL_KEYSET = ApprovalAdmin.keyset
# Five statuses, a branch each; a window of ApprovalAdmin.keyset_window a branch.
APPROVAL_PAGE_ROWS = 5 * (PER_PAGE + 1) + SLACK
APPROVAL_WINDOW_ROWS = 5 * ApprovalAdmin.keyset_window + SLACK


def test_the_approval_queue_reads_each_status_by_its_index_and_never_counts(
    lists: ScaleOrg,
) -> None:
    activate_all_orgs()
    org = lists.org
    rows = Approval.objects.filter(org=org)
    assert rows.count() > 10 * APPROVAL_WINDOW_ROWS  # the bound is far below a scan
    size = ApprovalAdmin.keyset_window
    ticketed = rows.get(approval_id="apr_list_35")
    mirrored = rows.get(action_hash=lists.action_hash(70 * ENTRIES_PER_APPROVAL))
    page, windowed = APPROVAL_PAGE_ROWS, APPROVAL_WINDOW_ROWS
    cases = [
        ("the queue", {}, newest(rows, APPROVAL_KEYSET), page),
        ("pending", {"status__exact": "pending"},
         newest(rows.filter(status="pending"), APPROVAL_KEYSET), page),
        ("rejected", {"status__exact": "rejected"},
         newest(rows.filter(status="rejected"), APPROVAL_KEYSET), page),
        ("an approval id", {"q": "apr_list_777"},
         [str(rows.get(approval_id="apr_list_777").pk)], page),
        ("an action hash", {"q": mirrored.action_hash}, [str(mirrored.pk)], page),
        ("a ticket hash", {"q": ticketed.ticket_hash}, [str(ticketed.pk)], page),
        ("a session", {"q": "as123"},
         newest(rows.filter(session_id="as123"), APPROVAL_KEYSET), page),
        ("nothing", {"q": "no-such-rule"}, [], windowed),
        ("a rule prefix, in a window", {"q": "rule-2"},
         window(rows, APPROVAL_KEYSET, size, Q(rule_id__startswith="rule-2")), windowed),
        ("escalated, in a window", {"flag__exact": "escalated"},
         window(rows, APPROVAL_KEYSET, size, Q(flag="escalated")), windowed),
        ("counts asked for", {"_facets": "1"}, newest(rows, APPROVAL_KEYSET), page),
    ]  # fmt: skip
    client = member(lists)
    answers = check_list(client, APPROVALS, cases, APPROVAL_TABLE, ENTRY_TABLE)
    first, statements = answers["the queue"]
    # Each row's receipt link is one entry, found by its hash.
    assert_bounded(statements, ENTRY_TABLE, rows=1)
    # The recently decided: the org's ten last decisions, by their own index.
    decided = rows.exclude(status="pending").filter(resolved_at__isnull=False)
    last_ten = list(decided.order_by("-resolved_at", "-id").values_list("approval_id", flat=True))
    section = first.content.decode().split('id="recently-decided"')[1]
    assert re.findall(r">(apr_[^<]+)</a>", section) == last_ten[:10]
    pages_on(client, APPROVALS, first, rows, APPROVAL_KEYSET, page, APPROVAL_TABLE)
    pending, _ = answers["pending"]
    pages_on(client, APPROVALS, pending, rows.filter(status="pending"), APPROVAL_KEYSET, page,
             APPROVAL_TABLE)  # fmt: skip


def test_a_windowed_approval_page_goes_on_below_its_window(lists: ScaleOrg) -> None:
    """A rule prefix that the window's approvals hardly hold: "Older" looks through the
    next window, never the org's whole list."""
    activate_all_orgs()
    rows = Approval.objects.filter(org=lists.org)
    size = ApprovalAdmin.keyset_window
    client = member(lists)
    first = client.get(APPROVALS, {"flag__exact": "escalated"})
    keys = newest(rows, APPROVAL_KEYSET, 2 * size)
    escalated = {str(pk) for pk in rows.filter(flag="escalated").values_list("pk", flat=True)}
    assert shown(first, APPROVALS) == [pk for pk in keys[:size] if pk in escalated]
    with list_reads(APPROVAL_TABLE) as statements:
        second = client.get(APPROVALS + cursor_link(first, "next"))
    assert shown(second, APPROVALS) == [pk for pk in keys[size:] if pk in escalated]
    assert_bounded(statements, APPROVAL_TABLE, rows=APPROVAL_WINDOW_ROWS)


# --- The webhook delivery log ----------------------------------------------------------

DELIVERIES = "/admin/events/delivery/"
DELIVERY_KEYSET = DeliveryAdmin.keyset
DELIVERY_PAGE_ROWS = SCALE_ENDPOINTS * (PER_PAGE + 1) + SLACK
DELIVERY_WINDOW_ROWS = SCALE_ENDPOINTS * DeliveryAdmin.keyset_window + SLACK


def test_the_delivery_log_reads_each_endpoint_by_its_index_and_never_counts(
    lists: ScaleOrg,
) -> None:
    activate_all_orgs()
    org = lists.org
    rows = Delivery.objects.filter(org=org)
    assert rows.count() > 10 * DELIVERY_WINDOW_ROWS
    endpoint = WebhookEndpoint.objects.filter(org=org).order_by("pk")[1]
    delivered = rows.get(event__event_id=f"evt_scale_{org.pk}_777")
    page, windowed = DELIVERY_PAGE_ROWS, DELIVERY_WINDOW_ROWS
    size = DeliveryAdmin.keyset_window
    cases = [
        ("the log", {}, newest(rows, DELIVERY_KEYSET), page),
        ("one endpoint's log", {"org": org.pk, "endpoint__id__exact": endpoint.pk},
         newest(rows.filter(endpoint=endpoint), DELIVERY_KEYSET), page),
        ("a webhook-id", {"q": f"evt_scale_{org.pk}_777"}, [str(delivered.pk)], page),
        ("an endpoint id", {"q": endpoint.endpoint_id},
         newest(rows.filter(endpoint=endpoint), DELIVERY_KEYSET), page),
        ("nothing", {"q": "evt_no_such_event"}, [], page),
        ("failed, in a window", {"status__exact": "failed"},
         window(rows, DELIVERY_KEYSET, size, Q(status="failed")), windowed),
        ("counts asked for", {"_facets": "1"}, newest(rows, DELIVERY_KEYSET), page),
    ]  # fmt: skip
    client = member(lists)
    answers = check_list(client, DELIVERIES, cases, DELIVERY_TABLE, EVENT_TABLE)
    first, _ = answers["the log"]
    pages_on(client, DELIVERIES, first, rows, DELIVERY_KEYSET, page, DELIVERY_TABLE)
    one, _ = answers["one endpoint's log"]
    pages_on(client, DELIVERIES, one, rows.filter(endpoint=endpoint), DELIVERY_KEYSET, page,
             DELIVERY_TABLE)  # fmt: skip
    # The endpoint's page links to its own log, in its org.
    endpoint_page = client.get(f"/admin/events/webhookendpoint/{endpoint.pk}/change/")
    assert f"?org={org.pk}&amp;endpoint__id__exact={endpoint.pk}" in endpoint_page.content.decode()


# --- The org audit trail ---------------------------------------------------------------

AUDIT = "/admin/tenancy/orgauditevent/"
AUDIT_KEYSET = ("-at", "-id")
AUDIT_WINDOW = KeysetAdmin.keyset_window
AUDIT_PAGE_ROWS = PER_PAGE + 1 + SLACK
AUDIT_WINDOW_ROWS = AUDIT_WINDOW + SLACK


def test_the_org_audit_trail_reads_its_org_by_index_and_never_counts(lists: ScaleOrg) -> None:
    activate_all_orgs()
    org = lists.org
    rows = OrgAuditEvent.objects.filter(org=org)
    assert rows.count() > 5 * AUDIT_WINDOW_ROWS
    page, windowed = AUDIT_PAGE_ROWS, AUDIT_WINDOW_ROWS
    searched = (
        Q(summary__icontains="hk_77") | Q(kind__icontains="hk_77") | Q(actor__icontains="hk_77")
    )
    cases = [
        ("the trail", {}, newest(rows, AUDIT_KEYSET), page),
        ("revocations, in a window", {"kind__exact": "api_key.revoked"},
         window(rows, AUDIT_KEYSET, AUDIT_WINDOW, Q(kind="api_key.revoked")), windowed),
        ("a search, in a window", {"q": "hk_77"},
         window(rows, AUDIT_KEYSET, AUDIT_WINDOW, searched), windowed),
        ("counts asked for", {"_facets": "1"}, newest(rows, AUDIT_KEYSET), page),
    ]  # fmt: skip
    client = member(lists, "auditor")
    answers = check_list(client, AUDIT, cases, AUDIT_TABLE)
    first, _ = answers["the trail"]
    pages_on(client, AUDIT, first, rows, AUDIT_KEYSET, page, AUDIT_TABLE)


# --- The background task results --------------------------------------------------------

TASKS = "/admin/django_tasks_database/dbtaskresult/"
TASK_KEYSET = ("-enqueued_at", "-id")
TASK_PAGE_ROWS = PER_PAGE + 1 + SLACK
TASK_WINDOW_ROWS = KeysetAdmin.keyset_window + SLACK


def test_the_task_results_read_by_their_enqueued_index_and_never_count(lists: ScaleOrg) -> None:
    rows = DBTaskResult.objects.all()
    assert rows.count() > 5 * TASK_WINDOW_ROWS
    size = KeysetAdmin.keyset_window
    page, windowed = TASK_PAGE_ROWS, TASK_WINDOW_ROWS
    cases = [
        ("the results", {}, newest(rows, TASK_KEYSET), page),
        ("failed, in a window", {"status__exact": "FAILED"},
         window(rows, TASK_KEYSET, size, Q(status="FAILED")), windowed),
        ("one queue, in a window", {"queue": "periodic"},
         window(rows, TASK_KEYSET, size, Q(queue_name="periodic")), windowed),
        ("counts asked for", {"_facets": "1"}, newest(rows, TASK_KEYSET), page),
    ]  # fmt: skip
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    answers = check_list(client, TASKS, cases, TASK_TABLE)
    first, _ = answers["the results"]
    pages_on(client, TASKS, first, rows, TASK_KEYSET, page, TASK_TABLE)
