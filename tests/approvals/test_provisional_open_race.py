"""A vote that reaches a provisionally opened approval before the SDK's explicit open
(server.md §6): the opener's threshold always holds.

A suspended push opens the approval provisionally (threshold 1, the content's rule). The
project's rule: votes before the explicit open count under those provisional terms; if the
explicit open keeps them, those votes stand; if it asks for another threshold or rule, the
approving votes cast before it are set aside (kept, never counted, the history says why),
the count starts again under the opener's terms and the approvers vote again; a verified
rejection stands in any lane. Team-path opens only explicitly (no push opens an approval,
and a vote needs the id its open returns), so no vote can precede its open there.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.approvals.models import Approval, ApprovalVote
from apps.approvals.services import approver_key_register
from apps.approvals.tokens import assemble_quorum_from_parts
from apps.receipts.verifier import verify_receipt
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_approval_flows import SCOPE, submit
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TEAMPATH, TeamPathCaller


def open_approval(client: APIClient, action_hash: str, **body: Any) -> Any:
    return client.post("/v1/approvals", {"action_hash": action_hash, **body}, format="json")


@pytest.fixture
def agent() -> Agent:
    return Agent()


@pytest.fixture
def suspended(push, agent, approvers) -> dict[str, Any]:
    receipt = suspended_receipt(agent)
    assert push(receipt).status_code == HTTPStatus.CREATED  # opens it provisionally, k = 1
    return receipt


def test_a_vote_before_the_open_never_settles_it_below_the_openers_threshold(
    cast, agent, suspended, sdk_client, approvers
) -> None:
    content = suspended["content"]
    action_hash = content["action_hash"]
    alice, bob, _ = approvers
    early_token = alice.token(content, scope=SCOPE)
    record, co_sig = alice.leg(content)  # the single-approver payload of the provisional lane
    early = submit(sdk_client, action_hash, content, early_token, record=record, co_sig_b64=co_sig)
    assert early.json()["status"] == "approved"  # threshold 1 until the opener says otherwise

    opened = open_approval(sdk_client, action_hash, rule_id=SCOPE, threshold=2)

    assert opened.status_code == HTTPStatus.CREATED
    assert (opened.json()["status"], opened.json()["threshold"]) == ("pending", 2)
    assert (opened.json()["approved_count"], opened.json()["resolved_at"]) == (0, None)
    polled = sdk_client.get(f"/v1/approvals/{action_hash}").json()
    assert (polled["status"], polled["threshold"], polled["approved_count"]) == ("pending", 2, 0)
    # The early vote is kept, never counted, and the history says why.
    approval = Approval.objects.get(action_hash=action_hash)
    vote = ApprovalVote.objects.get(approval=approval)
    assert vote.set_aside_at is not None
    assert "threshold 2" in vote.set_aside_reason
    (set_aside,) = approval.events.filter(kind="vote_set_aside")
    assert set_aside.detail["approver"] == alice.public
    assert "threshold 2" in set_aside.detail["reason"]
    assert approval.events.filter(kind="reopened").count() == 1
    # Its token stays spent; the approver votes again under the opener's terms.
    replay = submit(sdk_client, action_hash, content, early_token)
    assert replay.status_code == HTTPStatus.FORBIDDEN
    roster = sorted(approver.public for approver in approvers)
    for approver in (alice, bob):
        record, co_sig = approver.leg(content, threshold=2, roster=roster)
        answer = submit(
            sdk_client, action_hash, content, approver.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert answer.status_code == HTTPStatus.OK, answer.json()
    assert answer.json()["status"] == "approved"
    assert answer.json()["approved_count"] == 2
    parts = sdk_client.get(f"/v1/approvals/{action_hash}/assembly").json()
    assert (parts["threshold"], parts["roster"]) == (2, roster)
    assert len(parts["legs"]) == 2
    receipt = assemble_quorum_from_parts(
        agent.key,
        suspended_content=parts["suspended_content"],
        threshold=parts["threshold"],
        roster=parts["roster"],
        parts=parts["legs"],
    )
    verdict = verify_receipt(as_text(receipt))
    assert (verdict.kind, verdict.trust_level) == ("Valid", "L1")


def test_a_vote_before_an_open_that_keeps_the_provisional_terms_stands(
    cast, suspended, sdk_client, approvers
) -> None:
    content = suspended["content"]
    action_hash = content["action_hash"]
    submit(sdk_client, action_hash, content, approvers[0].token(content, scope=SCOPE))

    opened = open_approval(sdk_client, action_hash, rule_id="", threshold=1)

    assert opened.status_code == HTTPStatus.CREATED
    assert (opened.json()["status"], opened.json()["approved_count"]) == ("approved", 1)
    assert not ApprovalVote.objects.filter(set_aside_at__isnull=False).exists()


def test_an_open_binding_another_rule_sets_aside_the_votes_checked_under_the_old_one(
    cast, suspended, sdk_client, approvers
) -> None:
    content = suspended["content"]
    action_hash = content["action_hash"]
    submit(sdk_client, action_hash, content, approvers[0].token(content, scope=SCOPE))

    opened = open_approval(sdk_client, action_hash, rule_id="payments.other", threshold=1)

    assert (opened.json()["status"], opened.json()["approved_count"]) == ("pending", 0)
    vote = ApprovalVote.objects.get()
    assert "'payments.other'" in vote.set_aside_reason
    # A token for the old rule no longer fits; one for the opener's rule settles it.
    stale = submit(sdk_client, action_hash, content, approvers[0].token(content, scope=SCOPE))
    assert stale.status_code == HTTPStatus.FORBIDDEN
    fresh = approvers[0].token(content, scope="payments.other")
    assert submit(sdk_client, action_hash, content, fresh).json()["status"] == "approved"


def test_a_rejection_before_the_open_stands_whatever_threshold_the_open_asks(
    cast, suspended, sdk_client, approvers
) -> None:
    content = suspended["content"]
    action_hash = content["action_hash"]
    token = approvers[1].token(content, scope=SCOPE, decision="rejected")
    assert submit(sdk_client, action_hash, content, token).json()["status"] == "rejected"

    opened = open_approval(sdk_client, action_hash, rule_id=SCOPE, threshold=2)

    assert opened.status_code == HTTPStatus.CREATED
    assert opened.json()["status"] == "rejected"
    assert not ApprovalVote.objects.filter(set_aside_at__isnull=False).exists()


def _sdk_client(cast: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    return client


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(4))
def test_a_vote_racing_the_explicit_open_never_leaves_it_settled_below_the_threshold(
    cast, round_
) -> None:
    team = [Approver(name) for name in ("alice", "bob", "carol")]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    receipt = suspended_receipt(Agent())
    content = receipt["content"]
    action_hash = content["action_hash"]
    assert Pusher(_sdk_client(cast), cast.acme_key.secret)(receipt).status_code == 201
    token = team[0].token(content, scope=SCOPE)
    start = threading.Barrier(2)

    def vote() -> int:
        try:
            client = _sdk_client(cast)
            start.wait()
            return int(submit(client, action_hash, content, token).status_code)
        finally:
            connection.close()

    def open_it() -> int:
        try:
            client = _sdk_client(cast)
            start.wait()
            return int(open_approval(client, action_hash, rule_id=SCOPE, threshold=2).status_code)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        voted, opened = pool.submit(vote), pool.submit(open_it)
        assert (voted.result(), opened.result()) == (HTTPStatus.OK, HTTPStatus.CREATED)

    approval = Approval.objects.get(action_hash=action_hash)
    assert (approval.status, approval.threshold) == ("pending", 2)
    counted = ApprovalVote.objects.filter(approval=approval, set_aside_at__isnull=True).count()
    set_aside = approval.events.filter(kind="vote_set_aside").count()
    # Either the vote came first and was set aside, or the open came first and the vote
    # counts once toward 2: never lost silently, never approving at threshold 1.
    assert (counted, set_aside) in ((0, 1), (1, 0))
    assert approval.approved_count == counted


@pytest.mark.usefixtures(*TEAMPATH[2].args)
@TEAMPATH[0]
@TEAMPATH[1]
def test_on_team_path_no_push_opens_an_approval_so_no_vote_precedes_its_open(
    cast, agent, approvers
) -> None:
    acme = TeamPathCaller(cast.acme_key.secret)
    receipt = suspended_receipt(agent)
    assert acme.push(receipt).status_code == HTTPStatus.CREATED
    assert not Approval.objects.filter(org=cast.acme).exists()
    opened = acme.post("/v1/approvals", {"receipt": receipt})
    assert opened.status_code == HTTPStatus.CREATED
    approval_id = opened.json()["approvalId"]
    assert Approval.objects.get(approval_id=approval_id).threshold == 1
    content = receipt["content"]
    voted = acme.post(
        f"/v1/approvals/{approval_id}/token", {"token": approvers[0].token(content, scope=SCOPE)}
    )
    assert voted.json()["outcome"] == "approved"
