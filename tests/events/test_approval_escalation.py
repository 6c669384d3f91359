"""Reminders and escalation of a pending approval, with a frozen clock (the service takes
``now``): a reminder to the roster's members who have not voted, never more than one per
interval; one ``approval.escalated`` before the signed expiry to the escalation list (its
members by email, a subscribed webhook endpoint); nothing once the approval is settled."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from apps.approvals.models import Approval, ApprovalEscalation
from apps.approvals.services import (
    approval_open,
    approval_vote,
    approvals_escalate,
    approver_key_register,
)
from apps.events.models import Event
from apps.events.services import webhook_endpoint_create
from tests.approvals.conftest import Approver
from tests.console.test_approve_page import RULE, stored_content, suspended_receipt
from tests.events.conftest import work
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def person(username: str, email: str):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.get(username=username)
    user.email = email
    user.save(update_fields=["email"])
    return user


def types() -> list[str]:
    return list(Event.objects.order_by("id").values_list("type", flat=True))


def test_the_roster_is_reminded_then_the_escalation_list_is_told_once(cast, receiver) -> None:
    alice, bob = Approver("alice"), Approver("bob")
    approver_key_register(
        org=cast.acme,
        public_key=alice.public,
        key_id="alice",
        label="laptop",
        member=person("acme-auditor", "auditor@acme.test"),
    )
    approver_key_register(
        org=cast.acme,
        public_key=bob.public,
        key_id="bob",
        label="phone",
        member=person("acme-viewer", "viewer@acme.test"),
    )
    owner = person("acme-owner", "owner@acme.test")
    ApprovalEscalation.objects.create(
        org=cast.acme, rule_id=RULE, remind_every_minutes=30, escalate_before_minutes=15,
        escalate_to=[owner.pk],
    )  # fmt: skip
    # The org's default, for every other rule: it does not apply to this approval.
    ApprovalEscalation.objects.create(org=cast.acme, remind_every_minutes=1)
    endpoint = webhook_endpoint_create(
        org=cast.acme, url=receiver.url, event_types=["approval.escalated"]
    )
    receiver.secrets.append(endpoint.secret)
    content = stored_content(suspended_receipt(Agent()))
    approval = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content,
        rule_id=RULE, threshold=2,
    ).approval  # fmt: skip
    opened = approval.created_at
    Approval.objects.filter(pk=approval.pk).update(expires_at=opened + timedelta(minutes=120))
    at = lambda minutes: opened + timedelta(minutes=minutes)  # noqa: E731

    assert approvals_escalate(now=at(29)) == 0
    assert approvals_escalate(now=at(30)) == 1
    # Never more than one reminder per interval.
    assert [approvals_escalate(now=at(m)) for m in (30, 31, 59)] == [0, 0, 0]
    work(lambda: len(mail.outbox) >= 2)
    reminded = sorted(message.to[0] for message in mail.outbox)
    assert reminded == ["auditor@acme.test", "viewer@acme.test"]
    assert "Reminder" in mail.outbox[0].subject
    assert f"/approve/{approval.approval_id}" in mail.outbox[0].body

    # Bob votes; the next reminder goes only to the roster's member who has not voted.
    expiry = int(at(200).timestamp())
    approval_vote(
        org=cast.acme, action_hash=approval.action_hash, now=at(61),
        token=base64.b64decode(bob.token(content, scope=RULE, expiry=expiry)),
    )  # fmt: skip
    mail.outbox.clear()
    assert approvals_escalate(now=at(61)) == 1  # 31 minutes since the last reminder
    work(lambda: len(mail.outbox) >= 1)
    assert [message.to for message in mail.outbox] == [["auditor@acme.test"]]

    assert [approvals_escalate(now=at(m)) for m in (90, 91, 104)] == [0, 1, 0]
    work(lambda: len(mail.outbox) >= 2)
    # 15 minutes before the expiry: escalated, once, to the list and the endpoint.
    mail.outbox.clear()
    assert approvals_escalate(now=at(105)) == 1
    assert approvals_escalate(now=at(106)) == 0
    work(lambda: len(mail.outbox) >= 1 and len(receiver.received) >= 1)
    assert [message.to for message in mail.outbox] == [["owner@acme.test"]]
    assert "escalated" in mail.outbox[0].subject.lower()
    [delivered] = receiver.wait_for(1)
    assert delivered.json["type"] == "approval.escalated"
    assert delivered.json["data"]["approval_id"] == approval.approval_id
    assert delivered.json["data"]["minutes_before_expiry"] == 15
    assert types().count("approval.escalated") == 1
    approval.refresh_from_db()
    assert approval.escalated_at == at(105)

    # Settled: no reminder and no escalation any more.
    approval_vote(
        org=cast.acme, action_hash=approval.action_hash, now=at(107),
        token=base64.b64decode(alice.token(content, scope=RULE, expiry=expiry)),
    )  # fmt: skip
    before = types()
    assert [approvals_escalate(now=at(m)) for m in (140, 200, 500)] == [0, 0, 0]
    assert types() == before
    assert types().count("approval.reminder") == 3


def test_a_pending_approval_past_its_expiry_is_neither_reminded_nor_escalated(cast) -> None:
    ApprovalEscalation.objects.create(
        org=cast.acme, remind_every_minutes=5, escalate_before_minutes=10
    )
    content = stored_content(suspended_receipt(Agent()))
    approval = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content
    ).approval
    opened = approval.created_at
    Approval.objects.filter(pk=approval.pk).update(expires_at=opened + timedelta(minutes=60))
    assert approvals_escalate(now=opened + timedelta(minutes=61)) == 0
    assert approvals_escalate(now=opened + timedelta(minutes=5)) == 1  # a reminder
    assert approvals_escalate(now=opened + timedelta(minutes=50)) == 1  # the escalation
    assert approvals_escalate(now=opened + timedelta(minutes=200)) == 0


def test_an_owner_sets_the_escalation_in_the_console_for_members_only(cast) -> None:
    from django.test import Client

    from apps.tenancy.models import AuditKind, OrgAuditEvent
    from apps.tenancy.org_context import activate_default

    owner = get_user_model().objects.get(username="acme-owner")
    auditor = get_user_model().objects.get(username="acme-auditor")
    client = Client()
    client.force_login(owner)
    activate_default()
    form = {"org": cast.acme.pk, "rule_id": RULE, "remind_every_minutes": 30,
            "escalate_before_minutes": 15, "escalation_members": [auditor.pk]}  # fmt: skip
    answer = client.post("/admin/approvals/approvalescalation/add/", form)
    assert answer.status_code == 302, answer.content[:2000]
    setting = ApprovalEscalation.objects.get()
    assert (setting.rule_id, setting.escalate_to) == (RULE, [auditor.pk])
    assert OrgAuditEvent.objects.filter(kind=AuditKind.APPROVAL_ESCALATION_SET).count() == 1
    # A viewer cannot change it.
    viewer = Client()
    viewer.force_login(get_user_model().objects.get(username="acme-viewer"))
    activate_default()
    refused = viewer.post("/admin/approvals/approvalescalation/add/", {**form, "rule_id": "x"})
    assert refused.status_code == 403
    assert ApprovalEscalation.objects.count() == 1
