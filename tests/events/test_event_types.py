"""Every event type is emitted by the service that makes its change, with its payload
(recorded events are checked here; delivery itself in test_webhook_delivery)."""

from __future__ import annotations

import base64
from http import HTTPStatus

import pytest
from django.db import transaction

from apps.approvals.services import approval_open, approval_vote, approver_key_register
from apps.events.models import Delivery, EventType
from apps.events.models import Event as EventRow
from apps.events.services import webhook_endpoint_create
from apps.tenancy.models import DEFAULT_SCOPES
from apps.tenancy.services import api_key_issue, api_key_revoke, api_key_rotate
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_approval_flows import SCOPE
from tests.events.conftest import fan_out
from tests.receipts.factories import Agent, as_text

ALL = list(EventType.values)


@pytest.fixture
def subscribed(cast):
    return webhook_endpoint_create(org=cast.acme, url="http://127.0.0.1:9/hooks", event_types=ALL)


def _types(org) -> list[str]:
    return list(EventRow.objects.filter(org=org).order_by("id").values_list("type", flat=True))


def test_a_quorum_records_a_vote_event_per_vote_and_one_decision(cast, subscribed) -> None:
    team = [Approver(name) for name in ("a", "b", "c")]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    content = suspended_receipt(Agent())["content"]
    approval_open(org=cast.acme, action_hash=content["action_hash"], rule_id=SCOPE, threshold=2,
                  suspended_content=content)  # fmt: skip
    for approver in team[:2]:
        token = base64.b64decode(approver.token(content, scope=SCOPE))
        approval_vote(org=cast.acme, action_hash=content["action_hash"], token=token)

    assert _types(cast.acme) == [
        "approval.opened",
        "approval.waiting_for_approvers",
        "approval.vote_recorded",
        "approval.vote_recorded",
        "approval.decided",
    ]
    counts = [
        event.payload["approved_count"]
        for event in EventRow.objects.filter(type="approval.vote_recorded").order_by("id")
    ]
    assert counts == [1, 2]
    fan_out()
    assert Delivery.objects.count() == 5


def test_a_suspended_push_opens_provisionally_and_the_sdk_open_makes_it_wait(
    cast, subscribed, push
) -> None:
    receipt = suspended_receipt(Agent())
    assert push(receipt).status_code == HTTPStatus.CREATED
    assert _types(cast.acme) == ["approval.opened"]
    approval_open(org=cast.acme, action_hash=receipt["content"]["action_hash"], rule_id=SCOPE)
    assert _types(cast.acme) == ["approval.opened", "approval.waiting_for_approvers"]


def test_a_refused_receipt_is_an_event_with_its_kind_and_action_hash_only(
    cast, subscribed, push
) -> None:
    receipt = Agent().receipt()
    receipt["content"]["action"]["fields"]["query"] = "tampered"

    assert push(receipt).status_code == HTTPStatus.CONFLICT

    [event] = EventRow.objects.filter(type="receipt.refused")
    assert set(event.payload) == {"kind", "action_hash", "refused_at"}
    assert event.payload["kind"] == "HashMismatch"
    assert event.payload["action_hash"] == receipt["content"]["action_hash"]


def test_a_malformed_receipt_is_refused_without_an_action_hash(cast, subscribed, push) -> None:
    text = as_text(Agent().receipt()).replace(
        '"trust_level":"L0"', '"trust_level":"L0","trust_level":"L0"'
    )
    assert push(text).status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    [event] = EventRow.objects.filter(type="receipt.refused")
    assert (event.payload["kind"], event.payload["action_hash"]) == ("Malformed", None)


def test_the_quota_threshold_fires_at_80_and_100_percent_once_each(cast, subscribed, push) -> None:
    cast.acme.monthly_receipt_cap = 5
    cast.acme.save()
    agent = Agent()
    statuses = [push(agent.receipt()).status_code for _ in range(6)]

    assert statuses == [HTTPStatus.CREATED] * 5 + [HTTPStatus.PAYMENT_REQUIRED]
    events = EventRow.objects.filter(type="quota.threshold").order_by("id")
    assert [
        (e.payload["threshold_percent"], e.payload["count"], e.payload["cap"]) for e in events
    ] == [
        (80, 4, 5),
        (100, 5, 5),
    ]


def test_api_keys_created_rotated_and_revoked_are_events(cast, subscribed) -> None:
    issued = api_key_issue(org=cast.acme, scopes=DEFAULT_SCOPES, label="ci")
    rotated = api_key_rotate(prefix=issued.api_key.prefix)
    api_key_revoke(prefix=rotated.api_key.prefix)

    events = list(EventRow.objects.filter(type__startswith="api_key.").order_by("id"))
    assert [(e.type, e.payload["prefix"]) for e in events] == [
        ("api_key.created", issued.api_key.prefix),
        ("api_key.created", rotated.api_key.prefix),
        ("api_key.revoked", issued.api_key.prefix),
        ("api_key.revoked", rotated.api_key.prefix),
    ]
    assert all(issued.secret not in str(e.payload) for e in events)
    assert events[2].payload["revoked_at"] is not None


def test_an_endpoint_gets_only_the_types_it_asked_for(cast) -> None:
    webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/a", event_types=["api_key.revoked"]
    )
    issued = api_key_issue(org=cast.acme, scopes=DEFAULT_SCOPES, label="ci")
    assert _types(cast.acme) == []
    api_key_revoke(prefix=issued.api_key.prefix)
    assert _types(cast.acme) == ["api_key.revoked"]


def test_switched_off_events_record_nothing(cast, subscribed) -> None:
    from apps.common import outbound

    outbound.register_sink(None)
    try:
        api_key_issue(org=cast.acme, scopes=DEFAULT_SCOPES, label="ci")
    finally:
        from apps.events.services import event_record
        from apps.events.subscriptions import is_subscribed

        outbound.register_sink(event_record, is_subscribed)
    assert _types(cast.acme) == []


def test_an_event_in_a_rolled_back_savepoint_is_gone(cast, subscribed) -> None:
    with transaction.atomic():
        try:
            with transaction.atomic():
                api_key_issue(org=cast.acme, scopes=DEFAULT_SCOPES, label="ci")
                raise ValueError
        except ValueError:
            pass
    assert _types(cast.acme) == []


def test_a_monitor_alert_is_an_event_for_the_org_it_names_else_for_every_org(
    cast, subscribed
) -> None:
    from apps.transparency.models import OrgLog
    from apps.transparency.services import every_org, transparency_alerts_emit

    with every_org():
        acme_log = OrgLog.objects.get(org=cast.acme).log_id
    named = f"{acme_log}: head size 3 after 5"
    assert transparency_alerts_emit(alerts=[named], log_url="https://log.example") == 1
    (event,) = EventRow.objects.filter(type="transparency.alert")
    assert (event.org, event.payload["alert"], event.payload["log"]) == (
        cast.acme,
        named,
        "https://log.example",
    )
    # About the log as a whole: every org with a log hears of it.
    assert transparency_alerts_emit(alerts=["fork: another root at size 9"], log_url="x") == 2
    assert EventRow.objects.filter(type="transparency.alert").count() == 2  # globex: no endpoint
