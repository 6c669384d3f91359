"""Team-path approvals against the normative rules of server.md §6.

The team-path profile opens an approval from the receipt itself (threshold 1); the quorum
lane is reached here by raising the stored threshold before any vote, as an SDK-plane
open of the same action would. Every vote goes through the one vote path shared with the
key-scoped profile, so the same rules hold, with this profile's codes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

import pytest

from apps.approvals.models import Approval, ApprovalVote
from apps.approvals.services import approver_key_register
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_teampath_approvals_api import SCOPE, open_approval, submit
from tests.receipts.factories import Agent
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2999-01-01T00:00:00Z"
RECORD_KEYS = {"approvalId", "actionHash", "decision", "approverPublicKey", "decidedAt"}


@pytest.fixture
def approvers(cast) -> list[Approver]:
    team = [Approver(name) for name in ("alice", "bob", "carol")]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    return team


def resigned(signer: Agent, receipt: dict[str, Any], **changes: Any) -> dict[str, Any]:
    content = {k: v for k, v in receipt["content"].items() if k != "action_hash"}
    content.update(changes)
    return signer.sign(content)


def with_suspension(
    signer: Agent,
    receipt: dict[str, Any],
    *,
    expires_at: str = FUTURE,
    on_timeout: str = "deny",
    approver_pubkeys: list[str] | None = None,
) -> dict[str, Any]:
    suspension = {
        "resume_token_hash": "a" * 64,
        "context_ref": {"scheme": "none", "key": "k", "hash": "h"},
        "policy": {"policy_id": "pol_x", "policy_hash": "b" * 64, "rule": SCOPE},
        "approval": {
            "sla": "PT1H",
            "expires_at": expires_at,
            "on_timeout": on_timeout,
            "approver_pubkeys": approver_pubkeys or [],
        },
    }
    return resigned(signer, receipt, suspension=suspension)


def opened_id(acme, receipt, hint=None) -> str:
    response = open_approval(acme, receipt, hint)
    assert response.status_code == HTTPStatus.CREATED, response.content
    return response.json()["approvalId"]


def as_quorum(approval_id: str, threshold: int) -> None:
    """The quorum lane: the threshold an SDK-plane open would set, before any vote."""
    Approval.objects.filter(approval_id=approval_id).update(threshold=threshold)


def poll(acme, approval_id):
    return acme.get(f"/v1/approvals/{approval_id}")


# --- Nobody approves their own action ----------------------------------------------------------


def _self_approval_case(
    cast, acme, approvers: list[Approver], producer: str, *, mirrored: bool
) -> tuple[dict[str, Any], Approver, str]:
    """An opened approval one of whose producer keys is a registered approver key: its
    ``agent_identity`` (signed by another operator), or its operator signature (with another
    ``agent_identity``; registered before the key ever signed a receipt)."""
    if producer == "agent_identity":
        culprit = approvers[0]
        operator = Agent()
        receipt = resigned(operator, suspended_receipt(operator), agent_identity=culprit.public)
    else:
        culprit = Approver("olga")
        approver_key_register(org=cast.acme, public_key=culprit.public, key_id="olga")
        operator = Agent(seed=bytes(culprit.key))
        receipt = resigned(operator, suspended_receipt(operator), agent_identity=Agent().identity)
    if mirrored:
        assert acme.push(receipt).status_code == HTTPStatus.CREATED
    return receipt["content"], culprit, opened_id(acme, receipt)


class TestSelfApproval:
    @pytest.mark.parametrize("producer", ["agent_identity", "operator_key"])
    @pytest.mark.parametrize("threshold", [1, 2], ids=["single_lane", "quorum_lane"])
    def test_a_token_by_a_producer_key_of_a_mirrored_receipt_is_403_token_rejected(
        self, cast, acme, approvers, producer, threshold
    ):
        content, culprit, approval_id = _self_approval_case(
            cast, acme, approvers, producer, mirrored=True
        )
        as_quorum(approval_id, threshold)
        response = submit(acme, approval_id, culprit.token(content, scope=SCOPE))
        body = assert_error(response, HTTPStatus.FORBIDDEN, "token_rejected")
        assert "own action" in body["message"]
        assert not ApprovalVote.objects.exists()
        assert poll(acme, approval_id).json() == {"outcome": "pending"}

    @pytest.mark.parametrize("producer", ["agent_identity", "operator_key"])
    @pytest.mark.parametrize("threshold", [1, 2], ids=["single_lane", "quorum_lane"])
    def test_a_token_by_a_producer_key_of_a_receipt_only_opened_is_403_token_rejected(
        self, cast, acme, approvers, producer, threshold
    ):
        # POST /v1/approvals re-verifies the receipt, so the service knows who signed it
        # even when the receipt itself was never pushed to the outbox (the opener's
        # operator keys are kept on the approval).
        content, culprit, approval_id = _self_approval_case(
            cast, acme, approvers, producer, mirrored=False
        )
        as_quorum(approval_id, threshold)
        response = submit(acme, approval_id, culprit.token(content, scope=SCOPE))
        body = assert_error(response, HTTPStatus.FORBIDDEN, "token_rejected")
        assert "own action" in body["message"]
        assert not ApprovalVote.objects.exists()

    def test_another_approver_still_settles_it(self, cast, acme, approvers):
        content, _, approval_id = _self_approval_case(
            cast, acme, approvers, "agent_identity", mirrored=False
        )
        submit(acme, approval_id, approvers[0].token(content, scope=SCOPE))
        response = submit(acme, approval_id, approvers[1].token(content, scope=SCOPE))
        assert response.status_code == HTTPStatus.OK
        assert response.json()["outcome"] == "approved"


# --- Expiry -------------------------------------------------------------------------------------


class TestExpiry:
    @pytest.mark.parametrize("on_timeout", ["escalate", "auto_approve", "deny"])
    def test_a_token_after_the_signed_expiry_is_410_whatever_on_timeout_says(
        self, cast, acme, agent, approvers, on_timeout
    ):
        receipt = with_suspension(
            agent, suspended_receipt(agent), expires_at=PAST, on_timeout=on_timeout
        )
        approval_id = opened_id(acme, receipt, hint="oncall")
        token = approvers[0].token(receipt["content"], scope=SCOPE)
        assert_error(submit(acme, approval_id, token), HTTPStatus.GONE, "approval_expired")
        assert not ApprovalVote.objects.exists()

    @pytest.mark.parametrize("on_timeout", ["escalate", "auto_approve", "deny"])
    def test_an_unanswered_approval_past_expires_at_polls_expired_with_its_record(
        self, cast, acme, agent, approvers, on_timeout
    ):
        receipt = with_suspension(
            agent, suspended_receipt(agent), expires_at=PAST, on_timeout=on_timeout
        )
        approval_id = opened_id(acme, receipt, hint="oncall")
        body = poll(acme, approval_id).json()
        assert body["outcome"] == "expired"
        record = body["approval"]
        assert RECORD_KEYS | {"routingHint"} <= set(record)
        assert record["approvalId"] == approval_id
        assert record["actionHash"] == receipt["content"]["action_hash"]
        assert record["decision"] == "expired"
        assert record["approverPublicKey"] is None
        assert record["routingHint"] == "oncall"
        assert record["expiresAt"] == PAST
        assert record["votes"] == []
        # Polling again answers the same: nothing settles it afterwards.
        assert poll(acme, approval_id).json() == body

    def test_an_approval_with_the_default_ttl_refuses_tokens_once_past_it(
        self, cast, acme, agent, approvers
    ):
        receipt = suspended_receipt(agent)
        approval_id = opened_id(acme, receipt)
        Approval.objects.filter(approval_id=approval_id).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1)
        )
        token = approvers[0].token(receipt["content"], scope=SCOPE)
        assert_error(submit(acme, approval_id, token), HTTPStatus.GONE, "approval_expired")

    def test_an_approval_settled_before_expiry_keeps_its_decision_and_approver(
        self, cast, acme, agent, approvers
    ):
        receipt = with_suspension(agent, suspended_receipt(agent), on_timeout="escalate")
        approval_id = opened_id(acme, receipt, hint="oncall")
        alice = approvers[0]
        settled = submit(acme, approval_id, alice.token(receipt["content"], scope=SCOPE)).json()
        Approval.objects.filter(approval_id=approval_id).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1)
        )
        body = poll(acme, approval_id).json()
        assert body["outcome"] == "approved"
        record = body["approval"]
        assert (record["decision"], record["approverPublicKey"]) == ("approved", alice.public)
        assert record["decidedAt"] == settled["decidedAt"]
        assert record["routingHint"] == "oncall"


# --- Eligible approvers, roster, second votes -----------------------------------------------


class TestEligibleApprovers:
    def test_an_empty_signed_approver_list_narrows_nothing(self, cast, acme, agent, approvers):
        receipt = with_suspension(agent, suspended_receipt(agent), approver_pubkeys=[])
        approval_id = opened_id(acme, receipt)
        carol = approvers[2]
        response = submit(acme, approval_id, carol.token(receipt["content"], scope=SCOPE))
        assert response.status_code == HTTPStatus.OK
        assert response.json()["approverPublicKey"] == carol.public

    def test_a_signed_approver_list_narrows_who_may_vote(self, cast, acme, agent, approvers):
        alice, _, carol = approvers
        receipt = with_suspension(agent, suspended_receipt(agent), approver_pubkeys=[alice.public])
        approval_id = opened_id(acme, receipt)
        outsider = submit(acme, approval_id, carol.token(receipt["content"], scope=SCOPE))
        assert_error(outsider, HTTPStatus.FORBIDDEN, "token_rejected")
        allowed = submit(acme, approval_id, alice.token(receipt["content"], scope=SCOPE))
        assert allowed.status_code == HTTPStatus.OK

    def test_a_first_vote_with_fewer_eligible_keys_than_the_threshold_is_409(
        self, cast, acme, agent, approvers
    ):
        receipt = suspended_receipt(agent)
        approval_id = opened_id(acme, receipt)
        as_quorum(approval_id, 4)
        response = submit(acme, approval_id, approvers[0].token(receipt["content"], scope=SCOPE))
        body = assert_error(response, HTTPStatus.CONFLICT, "roster_too_small")
        assert "needs 4" in body["message"]
        assert "only 3" in body["message"]
        assert Approval.objects.get(approval_id=approval_id).roster_frozen_at is None

    def test_the_roster_freezes_at_the_first_vote_and_a_later_key_cannot_vote(
        self, cast, acme, agent, approvers
    ):
        alice, bob, _ = approvers
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        approval_id = opened_id(acme, receipt)
        as_quorum(approval_id, 2)
        first = submit(acme, approval_id, alice.token(content, scope=SCOPE))
        assert first.status_code == HTTPStatus.OK
        assert first.json()["outcome"] == "pending"
        frozen = Approval.objects.get(approval_id=approval_id)
        assert frozen.roster == sorted(approver.public for approver in approvers)
        dave = Approver("dave")
        approver_key_register(org=cast.acme, public_key=dave.public, key_id="dave")
        late = submit(acme, approval_id, dave.token(content, scope=SCOPE))
        assert_error(late, HTTPStatus.FORBIDDEN, "token_rejected")
        second = submit(acme, approval_id, bob.token(content, scope=SCOPE))
        assert (second.json()["outcome"], second.json()["approvedCount"]) == ("approved", 2)
        after = Approval.objects.get(approval_id=approval_id)
        assert (after.roster, after.roster_frozen_at) == (frozen.roster, frozen.roster_frozen_at)

    def test_a_second_vote_by_the_same_key_is_409_duplicate_vote(
        self, cast, acme, agent, approvers
    ):
        alice = approvers[0]
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        approval_id = opened_id(acme, receipt)
        as_quorum(approval_id, 2)
        first = submit(acme, approval_id, alice.token(content, scope=SCOPE))
        assert first.status_code == HTTPStatus.OK
        for decision in ("approved", "rejected"):
            again = submit(acme, approval_id, alice.token(content, scope=SCOPE, decision=decision))
            assert_error(again, HTTPStatus.CONFLICT, "duplicate_vote")
        assert poll(acme, approval_id).json() == {"outcome": "pending"}
        assert ApprovalVote.objects.count() == 1

    def test_the_decision_is_the_tokens_own(self, cast, acme, agent, approvers):
        receipt = suspended_receipt(agent)
        approval_id = opened_id(acme, receipt)
        as_quorum(approval_id, 2)
        token = approvers[0].token(receipt["content"], scope=SCOPE, decision="rejected")
        response = submit(acme, approval_id, token)
        assert response.json()["outcome"] == "rejected"
        assert response.json()["decision"] == "rejected"
        assert response.json()["approverPublicKey"] == approvers[0].public
