"""Concurrent votes (PostgreSQL), expiry outcomes and the approval commands."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from http import HTTPStatus

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.approvals.models import Approval, ApprovalVote, ApproverKey
from apps.approvals.selectors import eligible_approvers
from apps.approvals.services import approval_open, approvals_sweep, approver_key_register
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_approval_flows import SCOPE, submit
from tests.receipts.factories import Agent


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_votes_are_each_counted_once_and_resolve_once(cast) -> None:
    team = [Approver(f"a{index}") for index in range(6)]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    content = suspended_receipt(Agent())["content"]
    approval_open(org=cast.acme, action_hash=content["action_hash"], rule_id=SCOPE, threshold=4)

    def vote(approver: Approver) -> int:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
        try:
            token = approver.token(content, scope=SCOPE)
            return submit(client, content["action_hash"], content, token).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(team)) as pool:
        statuses = list(pool.map(vote, team))

    approval = Approval.objects.get(action_hash=content["action_hash"])
    # Exactly the threshold-crossing vote resolves it; later ones find it settled (409).
    assert statuses.count(HTTPStatus.OK) == 4
    assert statuses.count(HTTPStatus.CONFLICT) == 2
    assert (approval.status, approval.approved_count) == ("approved", 4)
    assert ApprovalVote.objects.filter(approval=approval).count() == 4
    assert approval.events.filter(kind="resolved").count() == 1


def _timed(cast, approvers, on_timeout: str, expired: bool = True) -> Approval:
    content = suspended_receipt(Agent())["content"]
    content["kind"] = "suspended"
    content["suspension"] = {
        "approval": {
            "sla": "1h",
            "expires_at": "2020-01-01T00:00:00Z" if expired else "2999-01-01T00:00:00Z",
            "on_timeout": on_timeout,
            "approver_pubkeys": [approvers[0].public, approvers[1].public],
        }
    }
    return approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content
    ).approval


def test_the_suspension_block_narrows_the_roster_and_sets_the_expiry(cast, approvers) -> None:
    approval = _timed(cast, approvers, "deny", expired=False)
    assert eligible_approvers(approval) == sorted([approvers[0].public, approvers[1].public])
    assert approval.roster_frozen_at is None  # it freezes at the first counted vote
    assert approval.expires_at.year == 2999
    assert approval.on_timeout == "deny"


@pytest.mark.parametrize(
    ("on_timeout", "status", "flag"),
    [
        ("deny", "rejected", ""),
        ("auto_approve", "pending", "auto_approve_refused"),
        ("escalate", "pending", "escalated"),
    ],
)
def test_an_expired_approval_reads_as_its_on_timeout_outcome_and_the_sweep_stores_it(
    cast, approvers, sdk_client, on_timeout, status, flag
) -> None:
    approval = _timed(cast, approvers, on_timeout)
    body = sdk_client.get(f"/v1/approvals/{approval.action_hash}").json()
    assert body["status"] == status
    approval.refresh_from_db()
    assert (approval.status, approval.flag) == ("pending", "")  # a read writes nothing
    assert approvals_sweep() == 1
    approval.refresh_from_db()
    assert (approval.status, approval.flag) == (status, flag)
    assert sdk_client.get(f"/v1/approvals/{approval.action_hash}").json() == body


def test_sweep_applies_expiry_in_bulk(cast, approvers, capsys) -> None:
    first = _timed(cast, approvers, "deny")
    call_command("sweep_approvals")
    assert json.loads(capsys.readouterr().out) == {"changed": 1}
    first.refresh_from_db()
    assert first.status == "rejected"
    assert approvals_sweep(now=timezone.now() + timedelta(days=1)) == 0


def test_register_approver_key_command(cast, capsys) -> None:
    erin = Approver("erin")
    call_command(
        "register_approver_key", "acme", erin.public, "--key-id", "erin", "--label", "Erin"
    )
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "org": "acme",
        "key_id": "erin",
        "public_key": erin.public,
        "change": "registered",
    }
    assert ApproverKey.objects.get(key_id="erin").label == "Erin"
