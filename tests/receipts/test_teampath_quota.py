"""The monthly receipt quota on the team-path profile: 429 alone, per result in a batch."""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus

from apps.receipts import errors as receipt_errors
from apps.receipts.errors import seconds_until_next_month
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.tenancy.services import org_set_limits
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH


def test_a_push_over_the_monthly_quota_is_429_with_retry_after_next_month(
    acme, agent, cast, monkeypatch
):
    org_set_limits(org=cast.acme, monthly_receipt_cap=2)
    acme.push(agent.receipt())
    acme.push(agent.receipt())
    monkeypatch.setattr(
        receipt_errors.timezone, "now", lambda: datetime(2026, 11, 30, 23, 59, 0, tzinfo=UTC)
    )
    receipt = agent.receipt()
    response = acme.push(receipt)
    body = assert_error(response, HTTPStatus.TOO_MANY_REQUESTS, "quota_exceeded")
    assert response["Retry-After"] == "60"
    assert body["accepted"] is False
    assert body["receiptId"] == receipt["content"]["action_hash"]
    assert body["rejectionReason"].startswith("quota_exceeded: monthly mirror soft-cap of 2")
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 2


def test_retry_after_is_a_positive_number_of_seconds_within_a_month(acme, agent, cast):
    org_set_limits(org=cast.acme, monthly_receipt_cap=0)
    response = acme.push(agent.receipt())
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert 1 <= int(response["Retry-After"]) <= 31 * 86400


def test_seconds_until_next_month_counts_to_the_first_instant_of_next_month_utc():
    assert seconds_until_next_month(datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)) == 1
    assert seconds_until_next_month(datetime(2026, 2, 1, 0, 0, 0, tzinfo=UTC)) == 28 * 86400
    assert seconds_until_next_month(datetime(2026, 11, 30, 23, 59, 59, 500_000, tzinfo=UTC)) == 1


def test_a_duplicate_is_still_accepted_when_the_quota_is_reached(acme, agent, cast):
    org_set_limits(org=cast.acme, monthly_receipt_cap=1)
    receipt = agent.receipt()
    acme.push(receipt)
    assert acme.push(receipt).status_code == HTTPStatus.OK


def test_a_batch_crossing_the_quota_refuses_the_rest_per_result(acme, agent, cast):
    org_set_limits(org=cast.acme, monthly_receipt_cap=3)
    acme.push(agent.receipt())
    receipts = [agent.receipt() for _ in range(4)]
    response = acme.batch(receipts)
    assert response.status_code == HTTPStatus.OK
    results = response.json()
    assert [result["accepted"] for result in results] == [True, True, False, False]
    for result, receipt in zip(results[2:], receipts[2:], strict=True):
        assert result["receiptId"] == receipt["content"]["action_hash"]
        assert result["rejectionReason"].startswith("quota_exceeded: monthly mirror soft-cap of 3")
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 3


def test_duplicates_in_a_full_batch_are_still_accepted(acme, agent, cast):
    org_set_limits(org=cast.acme, monthly_receipt_cap=1)
    receipt = agent.receipt()
    results = acme.batch([receipt, agent.receipt(), receipt]).json()
    assert [result["accepted"] for result in results] == [True, False, True]


def test_the_count_starts_again_in_a_new_month(acme, agent, cast):
    org_set_limits(org=cast.acme, monthly_receipt_cap=1)
    acme.push(agent.receipt())
    MirrorHead.objects.filter(org=cast.acme).update(month="2020-01")
    assert acme.batch([agent.receipt()]).json()[0]["accepted"] is True
