"""Pushes across the monthly quota's thresholds (80% and 100%) as a served request makes
them: outside any transaction of Django's, so the append is pipelined. The
``quota.threshold`` events are recorded once each in the append's transaction, never
inside its pipeline, and the refusal at 100% answers as each profile documents."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.events.models import Event as EventRow
from apps.events.models import EventType
from apps.events.services import webhook_endpoint_create
from apps.events.subscriptions import forget_subscribers
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from apps.tenancy.services import org_set_limits
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TeamPathCaller

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CAP = 5
# ceil(5 * 80%) = 4 and 5: the pushes that bring the month to 80% and 100%.
THRESHOLDS = [(80, 4, CAP), (100, 5, CAP)]


@pytest.fixture(params=["subscribed", "unsubscribed"])
def subscription(request: Any, cast: Any) -> str:
    """With a subscriber the events are recorded; without, the sink still asks the
    database who subscribes (its cache is cold), which is what failed in the pipeline."""
    forget_subscribers()
    if request.param == "subscribed":
        webhook_endpoint_create(
            org=cast.acme, url="http://127.0.0.1:9/hooks", event_types=list(EventType.values)
        )
    forget_subscribers()
    org_set_limits(org=cast.acme, monthly_receipt_cap=CAP)
    return str(request.param)


def recorded(cast: Any, subscription: str) -> None:
    events = EventRow.objects.filter(org=cast.acme, type="quota.threshold").order_by("id")
    found = [(e.payload["threshold_percent"], e.payload["count"], e.payload["cap"]) for e in events]
    assert found == (THRESHOLDS if subscription == "subscribed" else [])
    assert MirrorEntry.objects.filter(org=cast.acme).count() == CAP
    assert mirror_chain_check(org=cast.acme).ok


def test_keyscoped_pushes_cross_both_thresholds_and_the_next_is_refused(cast, subscription):
    push = Pusher(APIClient(), cast.acme_key.secret)
    agent = Agent()
    responses = [push(agent.receipt()) for _ in range(CAP + 1)]
    statuses = [response.status_code for response in responses]
    assert statuses == [HTTPStatus.CREATED] * CAP + [HTTPStatus.PAYMENT_REQUIRED], [
        r.content for r in responses
    ]
    assert [r.json()["seq"] for r in responses[:CAP]] == list(range(1, CAP + 1))
    refused = responses[-1].json()
    assert refused["status"] == "quota_exceeded"
    assert refused["detail"].startswith(f"monthly mirror soft-cap of {CAP}")
    recorded(cast, subscription)


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.usefixtures("teampath_profile")
def test_teampath_pushes_cross_both_thresholds_and_the_next_is_refused(cast, subscription):
    acme = TeamPathCaller(cast.acme_key.secret)
    agent = Agent()
    responses = [acme.push(agent.receipt()) for _ in range(CAP + 1)]
    assert [r.status_code for r in responses] == [HTTPStatus.CREATED] * CAP + [
        HTTPStatus.TOO_MANY_REQUESTS
    ], [r.content for r in responses]
    assert all(r.json()["accepted"] for r in responses[:CAP])
    refused = responses[-1].json()
    assert refused["error"] == "quota_exceeded"
    assert "Retry-After" in responses[-1]
    recorded(cast, subscription)


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.usefixtures("teampath_profile")
@pytest.mark.parametrize("first", [0, 2, 3, 4])
def test_teampath_batches_cross_both_thresholds_and_refuse_the_rest(cast, subscription, first):
    """``first`` receipts in one batch, then the rest (and two more) in another: every
    split puts the thresholds in one batch, in two, or in a batch after a single push."""
    acme = TeamPathCaller(cast.acme_key.secret)
    agent = Agent()
    receipts = [agent.receipt() for _ in range(CAP + 2)]
    results: list[dict[str, Any]] = []
    for part in (receipts[:first], receipts[first:]):
        if part:
            response = acme.batch(part)
            assert response.status_code == HTTPStatus.OK, response.content
            results += response.json()
    assert [r["accepted"] for r in results] == [True] * CAP + [False] * 2
    for result in results[CAP:]:
        assert result["rejectionReason"].startswith("quota_exceeded: monthly mirror soft-cap")
    recorded(cast, subscription)


def test_concurrent_pushes_record_each_threshold_once(cast) -> None:
    """Pushes racing across the thresholds: each is reached by exactly one append, whose
    pipelined attempt may be retried outside the pipeline while others take the lock."""
    from collections import Counter

    from tests.receipts.test_push_concurrency import _run

    forget_subscribers()
    webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/hooks", event_types=["quota.threshold"]
    )
    forget_subscribers()
    org_set_limits(org=cast.acme, monthly_receipt_cap=10)
    agent = Agent()
    batches = [[as_text(agent.receipt()) for _ in range(5)] for _ in range(4)]
    results = _run(cast.acme_key.secret, batches)
    assert Counter(status for status, _ in results) == {
        HTTPStatus.CREATED: 10,
        HTTPStatus.PAYMENT_REQUIRED: 10,
    }
    events = EventRow.objects.filter(org=cast.acme, type="quota.threshold").order_by("id")
    assert [(e.payload["threshold_percent"], e.payload["count"]) for e in events] == [
        (80, 8),
        (100, 10),
    ]
    assert mirror_chain_check(org=cast.acme).ok
