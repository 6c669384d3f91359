"""Which active holds cover a span of an org's receipts (``legal_holds_blocking``, the one
rule the retirement of receipt bodies and the retention of evidence exports ask)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone

from apps.audit.holds import legal_hold_release, legal_hold_set
from apps.audit.models import HoldScope
from apps.audit.selectors import legal_holds_blocking, session_received_rows
from apps.receipts.append_sql import ENTRY_TABLE
from apps.receipts.models import MirrorEntry
from apps.tenancy.org_context import activate_all_orgs
from tests.receipts.factories import Agent
from tests.receipts.test_append_plans import _fill, _generic_plan

pytestmark = pytest.mark.django_db


def at(day: int, hour: int = 0, minute: int = 0, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def blocking(org, start, end) -> list[str]:
    return [hold.hold_id for hold in legal_holds_blocking(org.pk, start=start, end=end)]


def test_an_org_wide_hold_covers_every_span_even_without_receipts(cast) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    assert blocking(cast.acme, at(1), at(2)) == [hold.hold_id]
    assert blocking(cast.acme, None, None) == [hold.hold_id]
    assert blocking(cast.globex, at(1), at(2)) == []  # another org's hold covers nothing here


@pytest.mark.parametrize(
    ("start", "end", "covered"),
    [
        (at(1), at(10), False),  # ends at midnight, as the hold's first day begins
        (at(1), at(10, 0, 1), True),  # one minute of its first day
        (at(20, 23, 59), at(25), True),  # the last minute of its last day
        (at(21), at(25), False),  # after its last day
        (at(12), at(13), True),  # inside
        (at(1), at(30), True),  # around it
        (None, at(10), False),
        (None, at(11), True),
        (at(21), None, False),
        (at(20), None, True),
        (None, None, True),
    ],
)
def test_a_range_hold_covers_the_spans_that_overlap_its_days(cast, start, end, covered) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.RANGE, reason="Case",
                          range_start=date(2026, 3, 10), range_end=date(2026, 3, 20))  # fmt: skip
    assert blocking(cast.acme, start, end) == ([hold.hold_id] if covered else [])


def test_a_range_open_on_one_side_covers_everything_on_that_side(cast) -> None:
    since = legal_hold_set(org=cast.acme, scope=HoldScope.RANGE, reason="Since",
                           range_start=date(2026, 3, 10))  # fmt: skip
    until = legal_hold_set(org=cast.acme, scope=HoldScope.RANGE, reason="Until",
                           range_end=date(2026, 3, 20))  # fmt: skip
    assert blocking(cast.acme, at(1, month=1), at(2, month=1)) == [until.hold_id]
    assert blocking(cast.acme, at(1, month=9), at(2, month=9)) == [since.hold_id]
    assert blocking(cast.acme, at(15), at(16)) == [since.hold_id, until.hold_id]


def _received(org, session_id: str, when: datetime) -> None:
    MirrorEntry.objects.filter(org=org, session_id=session_id).update(received_at=when)


def test_a_session_hold_covers_a_span_where_the_org_has_receipts_of_that_session(
    cast, push, globex_push
) -> None:
    agent = Agent()
    for receipt in agent.session("s-held", 2):
        assert push(receipt).status_code == HTTPStatus.CREATED
    for receipt in Agent().session("s-other", 1):
        assert push(receipt).status_code == HTTPStatus.CREATED
    for receipt in Agent().session("s-held", 1):  # the same session id, in another org
        assert globex_push(receipt).status_code == HTTPStatus.CREATED
    _received(cast.acme, "s-held", at(12, 9))
    _received(cast.acme, "s-other", at(5, 9))
    _received(cast.globex, "s-held", at(5, 9))
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.SESSION, session_id="s-held",
                          reason="Incident 3")  # fmt: skip

    assert blocking(cast.acme, at(12), at(13)) == [hold.hold_id]
    assert blocking(cast.acme, at(12, 9), at(12, 10)) == [hold.hold_id]
    assert blocking(cast.acme, at(1), at(12, 9)) == []  # end is exclusive
    # Receipts of other sessions, and the same id in another org, are not this hold's.
    assert blocking(cast.acme, at(5), at(6)) == []
    assert blocking(cast.acme, None, None) == [hold.hold_id]
    assert blocking(cast.acme, at(13), None) == []


def test_a_released_hold_covers_nothing(cast) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    legal_hold_release(hold=hold, reason="Closed")
    assert blocking(cast.acme, None, None) == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_session_question_reads_the_sessions_rows_not_the_span(cast) -> None:
    """On an org of thousands of entries with statistics, the generic plan of the session
    question reads through (org, session_id, session_seq) with the session in the index
    condition: never a scan of the table, nor of the org's span by (org, received_at)."""
    activate_all_orgs()
    _fill(cast.acme.pk)  # sessions of ten receipts, all received now
    now = timezone.now()
    rows = session_received_rows(cast.acme.pk, "s42", now - timedelta(days=1), now)
    sql, params = rows.values("pk")[:1].query.sql_with_params()
    nodes = _generic_plan(sql, list(params))
    scans = [node for node in nodes if node.get("Relation Name") == ENTRY_TABLE]
    assert [node["Node Type"] for node in scans] in (["Index Scan"], ["Bitmap Heap Scan"]), nodes
    used = [node for node in nodes if node.get("Index Name")]
    assert [node["Index Name"] for node in used] == ["mirror_entry_session"], nodes
    assert "session_id" in used[0]["Index Cond"]
