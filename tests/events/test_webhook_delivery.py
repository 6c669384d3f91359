"""Webhook delivery against a real receiver on 127.0.0.1 (PostgreSQL, a worker running the
database queue): every body's signature is verified with ``standardwebhooks``."""

from __future__ import annotations

import base64
import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.approvals.services import approval_open, approval_vote, approvals_sweep
from apps.events.models import Delivery, DeliveryStatus, Event, WebhookEndpoint
from apps.events.services import (
    delivery_redeliver,
    webhook_endpoint_create,
    webhook_endpoint_rotate_secret,
    webhook_endpoint_update,
)
from apps.policy.services import policy_deploy
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_approval_flows import SCOPE
from tests.events.conftest import Receiver, fan_out, work, worker_thread
from tests.policy.test_policy_api import rule_toml
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

APPROVAL_EVENTS = [
    "approval.opened",
    "approval.waiting_for_approvers",
    "approval.vote_recorded",
    "approval.decided",
]
POLICY = rule_toml("search.allow", "tool_call", "allow")


def _endpoint(org, receiver: Receiver, event_types, **extra) -> WebhookEndpoint:
    endpoint = webhook_endpoint_create(org=org, url=receiver.url, event_types=event_types, **extra)
    receiver.secrets.append(endpoint.secret)
    return endpoint


def _deliveries_settled() -> bool:
    return not Delivery.objects.filter(status__in=["pending", "sending"]).exists()


def _open_and_approve(org, approver: Approver, *, threshold: int = 1):
    content = suspended_receipt(Agent())["content"]
    approval_open(
        org=org, action_hash=content["action_hash"], rule_id=SCOPE, threshold=threshold,
        suspended_content=content,
    )  # fmt: skip
    token = base64.b64decode(approver.token(content, scope=SCOPE))
    return approval_vote(org=org, action_hash=content["action_hash"], token=token), content


@pytest.fixture
def alice(cast) -> Approver:
    from apps.approvals.services import approver_key_register

    approver = Approver("alice")
    approver_key_register(org=cast.acme, public_key=approver.public, key_id="alice")
    return approver


def test_each_approval_transition_arrives_signed_with_what_an_approver_needs(
    cast, receiver, alice
) -> None:
    _endpoint(cast.acme, receiver, APPROVAL_EVENTS)
    approval, content = _open_and_approve(cast.acme, alice)

    work(_deliveries_settled)

    received = receiver.wait_for(4)
    assert receiver.unverified == []
    assert [item.json["type"] for item in received] == APPROVAL_EVENTS
    assert len({item.webhook_id for item in received}) == 4
    opened = received[0].json["data"]
    assert opened["approval_id"] == approval.approval_id
    assert opened["action_hash"] == content["action_hash"]
    assert opened["signing_url"].endswith(f"/approve/{approval.approval_id}")
    assert opened["summary"]["action"]["verb"] == content["action"]["verb"]
    assert opened["summary"]["policy"]["rule_id"] == "payments.review"
    assert "fields" not in opened["summary"]["action"]
    vote = received[2].json["data"]
    assert (vote["decision"], vote["approver_public_key"]) == ("approved", alice.public)
    decided = received[3].json["data"]
    assert (decided["outcome"], decided["reason"], decided["status"]) == (
        "approved", "votes", "approved",
    )  # fmt: skip
    assert set(Delivery.objects.values_list("status", flat=True)) == {"succeeded"}


def test_an_expiry_is_an_approval_decided_event(cast, receiver, alice) -> None:
    _endpoint(cast.acme, receiver, ["approval.decided"])
    content = suspended_receipt(Agent())["content"]
    approval_open(
        org=cast.acme, action_hash=content["action_hash"], rule_id=SCOPE,
        expires_at=timezone.now() - timedelta(seconds=1),
    )  # fmt: skip
    assert approvals_sweep() == 1

    work(_deliveries_settled)

    [item] = receiver.wait_for(1)
    assert (item.json["data"]["outcome"], item.json["data"]["reason"]) == ("expired", "expired")


def test_a_rolled_back_change_leaves_no_event_and_no_task(cast, receiver) -> None:
    _endpoint(cast.acme, receiver, ["policy.deployed"])

    def deploy_then_fail() -> None:
        with transaction.atomic():
            policy_deploy(org=cast.acme, toml=POLICY)
            assert Event.objects.count() == 1  # recorded inside the transaction...
            raise RuntimeError("the change fails after the event was recorded")

    with pytest.raises(RuntimeError):
        deploy_then_fail()

    assert Event.objects.count() == 0  # ...and gone with it
    assert Delivery.objects.count() == 0
    assert DBTaskResult.objects.count() == 0
    work(timeout=0.5)
    assert receiver.received == []


def test_an_org_without_subscribers_records_nothing(cast, receiver) -> None:
    _endpoint(cast.globex, receiver, ["policy.deployed"])

    policy_deploy(org=cast.acme, toml=POLICY)

    assert Event.objects.count() == 0
    assert DBTaskResult.objects.count() == 0


def test_a_receiver_answering_500_gets_retries_with_the_same_webhook_id(
    cast, receiver, settings
) -> None:
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.2
    _endpoint(cast.acme, receiver, ["policy.deployed"])
    receiver.plan = [500, 503]

    policy_deploy(org=cast.acme, toml=POLICY)
    work(_deliveries_settled)

    received = receiver.wait_for(3)
    assert len(received) == 3
    assert len({item.webhook_id for item in received}) == 1
    assert len({item.body for item in received}) == 1
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("succeeded", 3, 200)
    assert delivery.endpoint.consecutive_failures == 0


def test_a_hanging_receiver_times_out_and_is_retried(cast, receiver, settings) -> None:
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.2
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    _endpoint(cast.acme, receiver, ["policy.deployed"])
    receiver.plan = [("hang", 3)]

    policy_deploy(org=cast.acme, toml=POLICY)
    work(lambda: Delivery.objects.filter(attempts__gte=1).exists())
    first = Delivery.objects.get()
    assert (first.status, first.last_status_code) == ("pending", None)
    assert "timed out" in first.last_error
    assert first.next_attempt_at > first.last_attempt_at
    work(_deliveries_settled)

    received = receiver.wait_for(2)
    assert len({item.webhook_id for item in received}) == 1
    assert Delivery.objects.get().status == "succeeded"


def test_retries_back_off_exponentially_with_jitter_and_stop_after_the_window(
    cast, receiver, settings
) -> None:
    from apps.events.delivery import backoff_seconds

    settings.WEBHOOK_RETRY_BASE_SECONDS = 5
    delays = [backoff_seconds(attempt) for attempt in range(1, 12)]
    assert 3.75 <= delays[0] < 6.25
    assert 15 <= delays[1] < 25
    assert all(delay <= settings.WEBHOOK_RETRY_MAX_DELAY_SECONDS * 1.25 for delay in delays)
    # the defaults retry for more than 24 hours before giving up
    assert settings.WEBHOOK_RETRY_WINDOW_SECONDS > 24 * 3600
    minimum_total = sum(min(5 * 4**n, 21_600) * 0.75 for n in range(11))
    assert minimum_total < settings.WEBHOOK_RETRY_WINDOW_SECONDS

    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.2
    settings.WEBHOOK_RETRY_WINDOW_SECONDS = 1
    _endpoint(cast.acme, receiver, ["policy.deployed"])
    receiver.plan = [500] * 50
    policy_deploy(org=cast.acme, toml=POLICY)
    work(_deliveries_settled)
    delivery = Delivery.objects.get()
    assert delivery.status == "failed"
    assert delivery.attempts == len(receiver.received)
    assert delivery.attempts >= 1


def test_a_disabled_endpoint_gets_nothing(cast, receiver) -> None:
    endpoint = _endpoint(cast.acme, receiver, ["policy.deployed"])
    webhook_endpoint_update(endpoint=endpoint, enabled=False)

    policy_deploy(org=cast.acme, toml=POLICY)
    work(timeout=0.5)

    assert receiver.received == []
    assert Delivery.objects.count() == 0


def test_a_run_of_failures_disables_the_endpoint_and_emails_the_owners(
    cast, receiver, settings
) -> None:
    settings.WEBHOOK_RETRY_BASE_SECONDS = 0.1
    settings.WEBHOOK_DISABLE_AFTER_FAILURES = 3
    endpoint = _endpoint(cast.acme, receiver, ["policy.deployed"])
    receiver.plan = [500] * 10
    owner = cast.acme.memberships.get(role="owner").user
    owner.email = "owner@acme.example"
    owner.save()

    policy_deploy(org=cast.acme, toml=POLICY)
    work(_deliveries_settled)

    endpoint.refresh_from_db()
    assert endpoint.enabled is False
    assert "3 failed attempts" in endpoint.disabled_reason
    assert len(receiver.received) == 3
    assert Delivery.objects.get().status == "failed"
    [message] = mail.outbox
    assert message.to == ["owner@acme.example"]
    assert "endpoint.disabled" in message.subject
    assert endpoint.url in message.body

    # Re-enabled, a redelivery goes out with the same webhook-id.
    webhook_endpoint_update(endpoint=endpoint, enabled=True)
    delivery_redeliver(delivery=Delivery.objects.get())
    receiver.plan = []
    work(_deliveries_settled)
    assert Delivery.objects.get().status == "succeeded"
    assert len({item.webhook_id for item in receiver.wait_for(4)}) == 1


def test_during_a_rotation_both_secrets_sign(cast, receiver, settings) -> None:
    endpoint = _endpoint(cast.acme, receiver, ["policy.deployed"])
    old_secret = endpoint.secret
    rotated = webhook_endpoint_rotate_secret(endpoint=endpoint)
    receiver.secrets.append(rotated.secret)
    assert rotated.secret != old_secret

    policy_deploy(org=cast.acme, toml=POLICY)
    work(_deliveries_settled)
    [item] = receiver.wait_for(1)
    assert sorted(item.verified_with) == sorted([old_secret, rotated.secret])
    assert len(item.headers["webhook-signature"].split(" ")) == 2

    # Past the overlap only the new secret signs.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        previous_secret_expires_at=timezone.now() - timedelta(seconds=1)
    )
    policy_deploy(org=cast.acme, toml=POLICY + "# v2\n")
    work(_deliveries_settled)
    second = receiver.wait_for(2)[1]
    assert second.verified_with == [rotated.secret]


def test_two_workers_share_the_queue_and_deliver_each_event_once(cast, receiver) -> None:
    _endpoint(cast.acme, receiver, ["policy.deployed"])
    for version in range(30):
        policy_deploy(org=cast.acme, toml=POLICY + f"# version {version}\n")
    assert Event.objects.count() == 30

    stop = threading.Event()
    workers = [worker_thread(stop, f"worker-{n}") for n in range(2)]
    received = receiver.wait_for(30, timeout=60)
    deadline = timezone.now() + timedelta(seconds=30)
    while not _deliveries_settled() and timezone.now() < deadline:
        threading.Event().wait(0.05)
    stop.set()
    for thread in workers:
        thread.join(timeout=10)

    ids = [item.webhook_id for item in received]
    assert len(ids) == 30
    assert len(set(ids)) == 30
    assert receiver.wait_for(31, timeout=0.5) == received  # nothing twice
    assert set(Delivery.objects.values_list("status", "attempts")) == {("succeeded", 1)}
    ran_by = {tuple(ids) for ids in DBTaskResult.objects.values_list("worker_ids", flat=True)}
    assert all(len(ids) == 1 for ids in ran_by)
    assert {ids[0] for ids in ran_by} == {"worker-0", "worker-1"}


def test_slack_endpoints_get_a_text_message(cast, receiver) -> None:
    _endpoint(cast.acme, receiver, ["policy.deployed"], format="slack")
    policy_deploy(org=cast.acme, toml=POLICY)
    work(_deliveries_settled)
    [item] = receiver.wait_for(1)
    assert set(item.json) == {"text"}
    assert "Policy deployed" in item.json["text"]


def test_a_delivery_claimed_by_a_dead_worker_is_picked_up_by_the_sweep(cast, receiver) -> None:
    from apps.events.tasks import sweep_deliveries

    _endpoint(cast.acme, receiver, ["policy.deployed"])
    policy_deploy(org=cast.acme, toml=POLICY)
    fan_out()
    DBTaskResult.objects.all().delete()  # the delivery's task was lost
    Delivery.objects.update(
        status=DeliveryStatus.SENDING, claimed_until=timezone.now() - timedelta(seconds=1)
    )
    assert sweep_deliveries.call() == 1
    work(_deliveries_settled)
    assert len(receiver.wait_for(1)) == 1


def test_two_worker_processes_share_the_queue_and_deliver_each_event_once(cast, receiver) -> None:
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from django.db import connection

    _endpoint(cast.acme, receiver, ["policy.deployed"])
    receiver.plan = [("hang", 0.15)] * 40  # slow enough that both workers get a share
    root = Path(__file__).resolve().parents[2]
    settings_dict = connection.settings_dict
    url = (
        f"postgres://{settings_dict['USER']}@{settings_dict['HOST']}:{settings_dict['PORT']}"
        f"/{settings_dict['NAME']}"
    )
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings.test",
           "WEBHOOK_ALLOW_PRIVATE_DESTINATIONS": "true"}  # fmt: skip
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "run_worker", "--no-periodic", f"--worker-id=p{n}"],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for n in range(2)
    ]
    try:
        for version in range(40):
            policy_deploy(org=cast.acme, toml=POLICY + f"# version {version}\n")
        received = receiver.wait_for(40, timeout=60)
        deadline = time.monotonic() + 30
        while not _deliveries_settled() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for process in workers:
            process.terminate()
        errors = [process.communicate(timeout=30)[1] for process in workers]

    assert [process.returncode for process in workers] == [0, 0], errors
    ids = [item.webhook_id for item in received]
    assert len(ids) == 40
    assert len(set(ids)) == 40
    assert receiver.unverified == []
    assert set(Delivery.objects.values_list("status", "attempts")) == {("succeeded", 1)}
    ran_by = [
        ids[0]
        for ids in DBTaskResult.objects.filter(
            task_path="apps.events.delivery.deliver_webhook"
        ).values_list("worker_ids", flat=True)
    ]
    assert len(ran_by) == 40
    assert set(ran_by) == {"p0", "p1"}
