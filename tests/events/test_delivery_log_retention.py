"""The webhook delivery log past WEBHOOK_DELIVERY_RETENTION_DAYS is deleted in bounded
batches: each old event whose deliveries are all finished, with its deliveries. A delivery
still pending or sending keeps its event; a legal hold keeps none of it (operational, not
evidence)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.holds import legal_hold_set
from apps.audit.models import HoldScope
from apps.events.models import Delivery, DeliveryStatus, Event
from apps.events.services import delivery_log_prune, webhook_endpoint_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def retention(settings):
    settings.WEBHOOK_DELIVERY_RETENTION_DAYS = 30
    settings.RETENTION_PRUNE_BATCH = 500
    settings.RETENTION_PRUNE_BATCHES_PER_RUN = 20


@pytest.fixture
def endpoints(cast):
    return [
        webhook_endpoint_create(
            org=cast.acme, url=f"http://127.0.0.1:9/{n}", event_types=["policy.deployed"]
        )
        for n in range(2)
    ]


def logged(org, *, days_ago: int, statuses: list[str], endpoints) -> Event:
    """An event recorded ``days_ago`` with one delivery per status."""
    when = timezone.now() - timedelta(days=days_ago)
    event = Event.objects.create(
        org=org, event_id=f"evt_{Event.objects.count()}_{days_ago}", type="policy.deployed",
        payload={}, created_at=when,
    )  # fmt: skip
    for endpoint, status in zip(endpoints, statuses, strict=False):
        Delivery.objects.create(org=org, endpoint=endpoint, event=event, status=status,
                                next_attempt_at=when, created_at=when)  # fmt: skip
    return event


def left(*events: Event) -> list[int]:
    return sorted(Event.objects.filter(pk__in=[e.pk for e in events]).values_list("pk", flat=True))


def test_old_finished_deliveries_go_with_their_event_and_the_rest_stays(
    cast, retention, endpoints
) -> None:
    done = logged(cast.acme, days_ago=31, endpoints=endpoints,
                  statuses=[DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED])  # fmt: skip
    waiting = logged(cast.acme, days_ago=45, endpoints=endpoints,
                     statuses=[DeliveryStatus.SUCCEEDED, DeliveryStatus.PENDING])  # fmt: skip
    sending = logged(cast.acme, days_ago=45, endpoints=endpoints,
                     statuses=[DeliveryStatus.SENDING])  # fmt: skip
    recent = logged(cast.acme, days_ago=29, endpoints=endpoints,
                    statuses=[DeliveryStatus.SUCCEEDED])  # fmt: skip
    nobody = logged(cast.acme, days_ago=60, endpoints=endpoints, statuses=[])

    assert delivery_log_prune() == 2  # ``done`` and ``nobody``

    assert left(done, waiting, sending, recent, nobody) == sorted(
        [waiting.pk, sending.pk, recent.pk]
    )
    assert not Delivery.objects.filter(event_id=done.pk).exists()
    # An event waiting for one delivery keeps all of its log, the finished one too.
    assert Delivery.objects.filter(event=waiting).count() == 2
    assert delivery_log_prune() == 0


def test_a_run_deletes_in_bounded_batches_oldest_first(cast, retention, endpoints, settings):
    settings.RETENTION_PRUNE_BATCH = 2
    settings.RETENTION_PRUNE_BATCHES_PER_RUN = 2
    events = [
        logged(cast.acme, days_ago=31 + n, endpoints=endpoints, statuses=[DeliveryStatus.SUCCEEDED])
        for n in range(5)
    ]
    assert delivery_log_prune() == 4
    assert left(*events) == [events[0].pk]  # the newest of the five
    assert delivery_log_prune() == 1
    assert Delivery.objects.count() == 0


def test_a_legal_hold_keeps_no_delivery_log(cast, retention, endpoints) -> None:
    legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    event = logged(cast.acme, days_ago=31, endpoints=endpoints,
                   statuses=[DeliveryStatus.SUCCEEDED])  # fmt: skip
    assert delivery_log_prune() == 1
    assert left(event) == []


def test_zero_days_keeps_the_whole_log(cast, retention, endpoints, settings) -> None:
    settings.WEBHOOK_DELIVERY_RETENTION_DAYS = 0
    event = logged(cast.acme, days_ago=3650, endpoints=endpoints,
                   statuses=[DeliveryStatus.FAILED])  # fmt: skip
    assert delivery_log_prune() == 0
    assert left(event) == [event.pk]
