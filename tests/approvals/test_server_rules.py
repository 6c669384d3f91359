"""Key-scoped approvals against the normative rules of server.md §6.

Opening, suspend tickets, eligible approvers and the frozen roster, self-approval in both
lanes, expiry whatever ``on_timeout`` says, attaching a leg after a leg-less vote, and
approver-key registration. The PostgreSQL races at the end check that the roster freezes
once and that a leg attached concurrently with another vote is never lost.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.approvals.content import ticket_hash
from apps.approvals.models import Approval, ApprovalVote, ApproverKey
from apps.approvals.selectors import approval_roster
from apps.approvals.services import PLACEHOLDER_DECISION_KEY, approver_key_register
from apps.approvals.tokens import assemble_l1_from_parts, assemble_quorum_from_parts
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_receipt
from apps.tenancy.models import OrgAuditEvent, Scope
from apps.tenancy.services import api_key_issue
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_approval_flows import SCOPE, submit
from tests.receipts.factories import Agent, as_text

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2999-01-01T00:00:00Z"


@pytest.fixture
def agent() -> Agent:
    return Agent()


def resigned(signer: Agent, receipt: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``receipt``'s content with ``changes``, sealed and signed again by ``signer``."""
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
    """The receipt with a signed suspension block (receipts.md §2.5): its expiry,
    ``on_timeout`` and approver list."""
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


def open_approval(client: APIClient, action_hash: str, **body: Any) -> Any:
    return client.post("/v1/approvals", {"action_hash": action_hash, **body}, format="json")


def poll(client: APIClient, ref: str) -> Any:
    return client.get(f"/v1/approvals/{ref}")


def assembly(client: APIClient, ref: str) -> Any:
    return client.get(f"/v1/approvals/{ref}/assembly")


def approval_of(content: dict[str, Any]) -> Approval:
    return Approval.objects.get(action_hash=content["action_hash"])


def approvers_write_client(cast: Any) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_X_API_KEY=api_key_issue(org=cast.acme, scopes=[Scope.APPROVERS_WRITE]).secret
    )
    return client


def register(client: APIClient, **body: Any) -> Any:
    return client.post("/v1/orgs/register-approver-pubkey", body, format="json")


# --- Opening ----------------------------------------------------------------------------------


class TestOpening:
    def test_opening_without_any_approver_key_is_201_pending(self, cast, agent, sdk_client):
        content = suspended_receipt(agent)["content"]
        response = open_approval(sdk_client, content["action_hash"], rule_id=SCOPE)
        assert response.status_code == HTTPStatus.CREATED
        assert response.json()["status"] == "pending"
        assert not ApproverKey.objects.exists()

    def test_pushing_a_suspended_receipt_without_any_approver_key_opens_it_pending(
        self, cast, agent, push, sdk_client
    ):
        receipt = suspended_receipt(agent)
        assert push(receipt).status_code == HTTPStatus.CREATED
        response = poll(sdk_client, receipt["content"]["action_hash"])
        assert response.status_code == HTTPStatus.OK
        assert response.json()["status"] == "pending"

    def test_an_empty_rule_id_after_the_push_keeps_the_contents_rule(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        opened = open_approval(sdk_client, content["action_hash"], rule_id="")
        assert opened.status_code == HTTPStatus.CREATED
        assert approval_of(content).rule_id == SCOPE
        token = approvers[0].token(content, scope=SCOPE)
        assert submit(sdk_client, content["action_hash"], content, token).status_code == 200

    def test_an_empty_rule_id_before_the_push_takes_the_rule_from_the_pushed_content(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        opened = open_approval(sdk_client, content["action_hash"], rule_id="")
        assert opened.status_code == HTTPStatus.CREATED
        assert push(receipt).status_code == HTTPStatus.CREATED
        assert approval_of(content).rule_id == SCOPE
        token = approvers[0].token(content, scope=SCOPE)
        assert submit(sdk_client, content["action_hash"], content, token).status_code == 200

    def test_an_empty_rule_id_without_a_push_binds_the_rule_of_the_voted_content(
        self, cast, agent, sdk_client, approvers
    ):
        # The receipt is never mirrored: the suspended content comes from the first
        # submit-token, and so does the rule id ("" means absent, server.md §6).
        content = suspended_receipt(agent)["content"]
        assert open_approval(sdk_client, content["action_hash"], rule_id="").status_code == 201
        token = approvers[0].token(content, scope=SCOPE)
        response = submit(sdk_client, content["action_hash"], content, token)
        assert response.status_code == HTTPStatus.OK, response.json()
        assert response.json()["status"] == "approved"
        assert approval_of(content).rule_id == SCOPE

    def test_an_empty_rule_id_without_a_push_never_accepts_a_token_for_the_empty_scope(
        self, cast, agent, sdk_client, approvers
    ):
        # "" is never a required scope: an empty-scope token would approve anything.
        content = suspended_receipt(agent)["content"]
        assert open_approval(sdk_client, content["action_hash"], rule_id="").status_code == 201
        token = approvers[0].token(content, scope="")
        response = submit(sdk_client, content["action_hash"], content, token)
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert not ApprovalVote.objects.exists()

    def test_matched_conditions_and_scope_are_kept_as_display_context(
        self, cast, agent, sdk_client
    ):
        content = suspended_receipt(agent)["content"]
        conditions = [{"field": "verb", "op": "eq", "value": "payment"}]
        response = open_approval(
            sdk_client, content["action_hash"], rule_id=SCOPE, workflow="billing",
            account="acct-7", matched_conditions=conditions, scope="payments",
        )  # fmt: skip
        assert response.status_code == HTTPStatus.CREATED
        approval = approval_of(content)
        assert approval.context == {"matched_conditions": conditions, "scope": "payments"}
        assert (approval.workflow, approval.account) == ("billing", "acct-7")

    def test_the_first_explicit_open_after_the_push_is_201_and_keeps_its_context(
        self, cast, agent, push, sdk_client
    ):
        receipt = suspended_receipt(agent)
        action_hash = receipt["content"]["action_hash"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        first = open_approval(sdk_client, action_hash, rule_id="", scope="payments")
        again = open_approval(sdk_client, action_hash, rule_id="", scope="other")
        assert (first.status_code, again.status_code) == (HTTPStatus.CREATED, HTTPStatus.OK)
        assert first.json()["approval_id"] == again.json()["approval_id"]
        assert approval_of(receipt["content"]).context["scope"] == "payments"


# --- Suspend tickets --------------------------------------------------------------------------


class TestSuspendTickets:
    def test_a_ticket_reaches_the_pushed_contents_approval_for_open_poll_vote_and_assembly(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        ticket = ticket_hash(content)
        assert ticket != content["action_hash"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        approval_id = poll(sdk_client, content["action_hash"]).json()["approval_id"]

        opened = open_approval(sdk_client, ticket, rule_id=SCOPE)
        assert opened.status_code == HTTPStatus.CREATED  # the first explicit open
        assert opened.json()["approval_id"] == approval_id
        assert opened.json()["action_hash"] == content["action_hash"]
        assert poll(sdk_client, ticket).json()["approval_id"] == approval_id

        alice = approvers[0]
        record, co_sig = alice.leg(content)
        voted = submit(
            sdk_client, ticket, content, alice.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert voted.status_code == HTTPStatus.OK
        assert (voted.json()["approval_id"], voted.json()["status"]) == (approval_id, "approved")
        parts = assembly(sdk_client, ticket)
        assert parts.status_code == HTTPStatus.OK
        assert parts.json()["legs"] == [
            {"record": record, "approver_pubkey_b64": alice.public, "co_sig_b64": co_sig}
        ]
        assert Approval.objects.count() == 1

    def test_an_approval_opened_by_ticket_refuses_votes_until_its_receipt_is_pushed(
        self, cast, agent, sdk_client, approvers
    ):
        content = suspended_receipt(agent)["content"]
        ticket = ticket_hash(content)
        assert open_approval(sdk_client, ticket, rule_id=SCOPE).status_code == 201
        polled = poll(sdk_client, ticket)
        assert (polled.status_code, polled.json()["status"]) == (HTTPStatus.OK, "pending")
        early = submit(sdk_client, ticket, content, approvers[0].token(content, scope=SCOPE))
        assert early.status_code == HTTPStatus.CONFLICT
        assert "pushed" in early.json()["detail"]
        assert not ApprovalVote.objects.exists()

    def test_a_ticket_opened_approval_merges_into_the_pushed_content_keeping_its_id(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        action_hash, ticket = content["action_hash"], ticket_hash(content)
        opened = open_approval(sdk_client, ticket, rule_id=SCOPE, threshold=1, scope="payments")
        approval_id = opened.json()["approval_id"]

        assert push(receipt).status_code == HTTPStatus.CREATED
        assert Approval.objects.count() == 1
        approval = Approval.objects.get()
        assert (approval.approval_id, approval.action_hash) == (approval_id, action_hash)
        assert approval.ticket_hash == ticket
        assert approval.context == {"scope": "payments"}
        for ref in (action_hash, ticket):
            assert poll(sdk_client, ref).json()["approval_id"] == approval_id
        # The SDK's own open by the content hash finds it: a re-open, not a second approval.
        again = open_approval(sdk_client, action_hash, rule_id=SCOPE)
        assert (again.status_code, again.json()["approval_id"]) == (HTTPStatus.OK, approval_id)

        alice = approvers[0]
        record, co_sig = alice.leg(content)
        voted = submit(
            sdk_client, ticket, content, alice.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert (voted.status_code, voted.json()["status"]) == (HTTPStatus.OK, "approved")
        assert assembly(sdk_client, action_hash).status_code == HTTPStatus.OK

    def test_a_ticket_shared_by_two_operators_contents_is_refused_naming_both_hashes(
        self, cast, push, sdk_client, approvers
    ):
        first_operator, second_operator = Agent(), Agent()
        first = suspended_receipt(first_operator)
        second = resigned(second_operator, first, agent_identity=second_operator.identity)
        ticket = ticket_hash(first["content"])
        assert ticket_hash(second["content"]) == ticket
        assert push(first).status_code == HTTPStatus.CREATED
        assert push(second).status_code == HTTPStatus.CREATED
        hashes = (first["content"]["action_hash"], second["content"]["action_hash"])

        content = first["content"]
        token = approvers[0].token(content, scope=SCOPE)
        for response in (
            poll(sdk_client, ticket),
            open_approval(sdk_client, ticket, rule_id=SCOPE),
            submit(sdk_client, ticket, content, token),
            assembly(sdk_client, ticket),
        ):
            assert response.status_code == HTTPStatus.CONFLICT
            detail = response.json()["detail"]
            assert hashes[0] in detail
            assert hashes[1] in detail
        assert not ApprovalVote.objects.exists()
        # Each content's own hash still names exactly its approval, and votes count there.
        ids = {poll(sdk_client, action_hash).json()["approval_id"] for action_hash in hashes}
        assert len(ids) == 2
        voted = submit(sdk_client, hashes[0], content, token)
        assert (voted.status_code, voted.json()["status"]) == (HTTPStatus.OK, "approved")
        assert poll(sdk_client, hashes[1]).json()["status"] == "pending"


# --- Eligible approvers and the roster -----------------------------------------------------


class TestEligibleApprovers:
    def test_an_empty_signed_approver_list_narrows_nothing(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = with_suspension(
            agent, suspended_receipt(agent), expires_at=FUTURE, approver_pubkeys=[]
        )
        content = receipt["content"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=3)
        for approver in approvers:
            token = approver.token(content, scope=SCOPE)
            assert submit(sdk_client, content["action_hash"], content, token).status_code == 200
        approval = approval_of(content)
        assert approval.status == "approved"
        assert approval.roster == sorted(approver.public for approver in approvers)

    def test_a_signed_approver_list_narrows_who_may_vote(
        self, cast, agent, push, sdk_client, approvers
    ):
        alice, bob, carol = approvers
        receipt = with_suspension(
            agent, suspended_receipt(agent), expires_at=FUTURE,
            approver_pubkeys=[alice.public, bob.public],
        )  # fmt: skip
        content = receipt["content"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        outsider = submit(
            sdk_client, content["action_hash"], content, carol.token(content, scope=SCOPE)
        )
        assert outsider.status_code == HTTPStatus.FORBIDDEN
        assert not ApprovalVote.objects.exists()

    def test_a_first_vote_with_fewer_eligible_keys_than_the_threshold_names_both_numbers(
        self, cast, agent, push, sdk_client, approvers
    ):
        alice = approvers[0]
        receipt = with_suspension(
            agent, suspended_receipt(agent), expires_at=FUTURE, approver_pubkeys=[alice.public]
        )
        content = receipt["content"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=2)
        response = submit(
            sdk_client, content["action_hash"], content, alice.token(content, scope=SCOPE)
        )
        assert response.status_code == HTTPStatus.CONFLICT
        detail = response.json()["detail"]
        assert "needs 2" in detail
        assert "only 1" in detail
        approval = approval_of(content)
        assert (approval.roster_frozen_at, approval.roster) == (None, [])

    def test_the_roster_freezes_at_the_first_counted_vote_and_never_changes(
        self, cast, agent, sdk_client, approvers
    ):
        alice, bob, _ = approvers
        content = suspended_receipt(agent)["content"]
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=2)
        assert approval_of(content).roster_frozen_at is None
        first = submit(
            sdk_client, content["action_hash"], content, alice.token(content, scope=SCOPE)
        )
        assert first.status_code == HTTPStatus.OK
        frozen = approval_of(content)
        assert frozen.roster_frozen_at is not None
        assert frozen.roster == sorted(approver.public for approver in approvers)

        dave = Approver("dave")
        approver_key_register(org=cast.acme, public_key=dave.public, key_id="dave")
        late = submit(sdk_client, content["action_hash"], content, dave.token(content, scope=SCOPE))
        assert late.status_code == HTTPStatus.FORBIDDEN
        second = submit(
            sdk_client, content["action_hash"], content, bob.token(content, scope=SCOPE)
        )
        assert (second.status_code, second.json()["status"]) == (HTTPStatus.OK, "approved")
        after = approval_of(content)
        assert (after.roster, after.roster_frozen_at) == (frozen.roster, frozen.roster_frozen_at)
        assert dave.public not in after.roster

    def test_a_leg_less_approving_vote_counts_toward_a_quorum(
        self, cast, agent, sdk_client, approvers
    ):
        alice, bob, _ = approvers
        content = suspended_receipt(agent)["content"]
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=2)
        for index, approver in enumerate((alice, bob), start=1):
            token = approver.token(content, scope=SCOPE)
            response = submit(sdk_client, content["action_hash"], content, token)
            assert response.json()["approved_count"] == index
        assert response.json()["status"] == "approved"

    def test_a_rejecting_token_rejects_without_a_declared_decision(
        self, cast, agent, sdk_client, approvers
    ):
        content = suspended_receipt(agent)["content"]
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=2)
        token = approvers[0].token(content, scope=SCOPE, decision="rejected")
        response = submit(sdk_client, content["action_hash"], content, token)
        assert (response.status_code, response.json()["status"]) == (HTTPStatus.OK, "rejected")
        assert ApprovalVote.objects.get().decision == "rejected"

    def test_a_second_vote_by_the_same_key_is_409_in_either_direction(
        self, cast, agent, sdk_client, approvers
    ):
        alice = approvers[0]
        content = suspended_receipt(agent)["content"]
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=2)
        submit(sdk_client, content["action_hash"], content, alice.token(content, scope=SCOPE))
        for decision in ("approved", "rejected"):
            token = alice.token(content, scope=SCOPE, decision=decision)
            again = submit(sdk_client, content["action_hash"], content, token)
            assert again.status_code == HTTPStatus.CONFLICT
        approval = approval_of(content)
        assert (approval.status, approval.approved_count) == ("pending", 1)


# --- Nobody approves their own action ----------------------------------------------------------


def _self_approval_case(
    cast: Any, push: Any, approvers: list[Approver], producer: str
) -> tuple[dict[str, Any], Approver]:
    """A pushed suspended receipt one of whose producer keys is a registered approver key:
    its ``agent_identity`` (signed by another operator), or its operator signature (with
    another ``agent_identity``, registered before the key ever signed a receipt)."""
    if producer == "agent_identity":
        culprit = approvers[0]
        receipt = resigned(
            (operator := Agent()), suspended_receipt(operator), agent_identity=culprit.public
        )
    else:
        culprit = Approver("olga")
        approver_key_register(org=cast.acme, public_key=culprit.public, key_id="olga")
        operator = Agent(seed=bytes(culprit.key))
        receipt = resigned(operator, suspended_receipt(operator), agent_identity=Agent().identity)
    assert push(receipt).status_code == HTTPStatus.CREATED
    return receipt["content"], culprit


class TestSelfApproval:
    @pytest.mark.parametrize("producer", ["agent_identity", "operator_key"])
    @pytest.mark.parametrize("with_leg", [False, True], ids=["token", "token_and_leg"])
    def test_a_producer_key_cannot_approve_in_the_single_lane(
        self, cast, push, sdk_client, approvers, producer, with_leg
    ):
        content, culprit = _self_approval_case(cast, push, approvers, producer)
        extra = {}
        if with_leg:
            record, co_sig = culprit.leg(content)
            extra = {"record": record, "co_sig_b64": co_sig}
        token = culprit.token(content, scope=SCOPE)
        response = submit(sdk_client, content["action_hash"], content, token, **extra)
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert "own action" in response.json()["detail"]
        assert not ApprovalVote.objects.exists()
        assert approval_of(content).status == "pending"

    @pytest.mark.parametrize("producer", ["agent_identity", "operator_key"])
    @pytest.mark.parametrize("with_leg", [False, True], ids=["token", "token_and_leg"])
    def test_a_producer_key_cannot_approve_in_the_quorum_lane(
        self, cast, push, sdk_client, approvers, producer, with_leg
    ):
        content, culprit = _self_approval_case(cast, push, approvers, producer)
        assert open_approval(sdk_client, content["action_hash"], rule_id=SCOPE, threshold=2)
        approval = approval_of(content)
        assert approval.threshold == 2
        roster = approval_roster(approval)
        assert culprit.public in roster  # registered and eligible: only the rule refuses it
        extra = {}
        if with_leg:
            record, co_sig = culprit.leg(content, threshold=2, roster=roster)
            extra = {"record": record, "co_sig_b64": co_sig}
        token = culprit.token(content, scope=SCOPE)
        response = submit(sdk_client, content["action_hash"], content, token, **extra)
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert "own action" in response.json()["detail"]
        assert not ApprovalVote.objects.exists()
        assert approval_of(content).roster_frozen_at is None

    def test_an_agent_identity_approver_is_refused_before_any_push(
        self, cast, sdk_client, approvers
    ):
        alice = approvers[0]
        operator = Agent()
        content = resigned(operator, suspended_receipt(operator), agent_identity=alice.public)[
            "content"
        ]
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE)
        response = submit(
            sdk_client, content["action_hash"], content, alice.token(content, scope=SCOPE)
        )
        assert response.status_code == HTTPStatus.FORBIDDEN
        assert not ApprovalVote.objects.exists()


# --- Expiry -------------------------------------------------------------------------------------


class TestExpiry:
    @pytest.mark.parametrize("on_timeout", ["escalate", "auto_approve", "deny"])
    @pytest.mark.parametrize("with_leg", [False, True], ids=["token", "token_and_leg"])
    def test_a_vote_after_the_signed_expiry_is_409_whatever_on_timeout_says(
        self, cast, agent, push, sdk_client, approvers, on_timeout, with_leg
    ):
        receipt = with_suspension(
            agent, suspended_receipt(agent), expires_at=PAST, on_timeout=on_timeout
        )
        content = receipt["content"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        alice = approvers[0]
        extra = {}
        if with_leg:
            record, co_sig = alice.leg(content)
            extra = {"record": record, "co_sig_b64": co_sig}
        token = alice.token(content, scope=SCOPE)
        response = submit(sdk_client, content["action_hash"], content, token, **extra)
        assert response.status_code == HTTPStatus.CONFLICT
        assert "expired" in response.json()["detail"]
        assert not ApprovalVote.objects.exists()
        expected = "rejected" if on_timeout == "deny" else "pending"
        assert poll(sdk_client, content["action_hash"]).json()["status"] == expected


# --- Attaching a leg after a leg-less vote -----------------------------------------------------


class TestLegAttach:
    @pytest.mark.parametrize("same_token", [True, False], ids=["same_token", "fresh_token"])
    def test_a_leg_attached_after_a_leg_less_vote_finalizes_the_single_approver_l1(
        self, cast, agent, push, sdk_client, approvers, same_token
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        action_hash = content["action_hash"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        alice = approvers[0]
        token = alice.token(content, scope=SCOPE)
        voted = submit(sdk_client, action_hash, content, token)
        assert (voted.status_code, voted.json()["status"]) == (HTTPStatus.OK, "approved")
        vote = ApprovalVote.objects.get()

        missing = assembly(sdk_client, action_hash)
        assert missing.status_code == HTTPStatus.CONFLICT
        detail = missing.json()["detail"]
        assert "1 of 1" in detail
        assert "miss" in detail
        assert "not yet approved" not in detail

        record, co_sig = alice.leg(content)
        again = token if same_token else alice.token(content, scope=SCOPE)
        attached = submit(sdk_client, action_hash, content, again, record=record, co_sig_b64=co_sig)
        assert attached.status_code == HTTPStatus.OK
        assert attached.json() == voted.json()
        stored = ApprovalVote.objects.get()
        assert (stored.pk, stored.nonce, stored.voted_at, stored.decision) == (
            vote.pk, vote.nonce, vote.voted_at, "approved",
        )  # fmt: skip
        assert (stored.record, stored.co_sig_b64) == (record, co_sig)

        parts = assembly(sdk_client, action_hash)
        assert parts.status_code == HTTPStatus.OK
        leg = parts.json()["legs"][0]
        assert leg == {"record": record, "approver_pubkey_b64": alice.public, "co_sig_b64": co_sig}
        l1 = assemble_l1_from_parts(
            agent.key,
            suspended_content=parts.json()["suspended_content"],
            record=leg["record"],
            approver_pubkey_b64=leg["approver_pubkey_b64"],
            co_sig_b64=leg["co_sig_b64"],
        )
        assert verify_receipt(as_text(l1)).trust_level == "L1"
        assert push(l1, supersedes=action_hash).status_code == HTTPStatus.CREATED
        old = MirrorEntry.objects.get(org=cast.acme, action_hash=action_hash)
        assert old.superseded_by == l1["content"]["action_hash"]

    def test_a_quorum_vote_can_attach_its_leg_after_the_threshold_is_met(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        action_hash = content["action_hash"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        open_approval(sdk_client, action_hash, rule_id=SCOPE, threshold=2)
        alice, bob, _ = approvers
        assert submit(sdk_client, action_hash, content, alice.token(content, scope=SCOPE))
        roster = approval_roster(approval_of(content))
        record, co_sig = bob.leg(content, threshold=2, roster=roster)
        bob_vote = submit(
            sdk_client, action_hash, content, bob.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert bob_vote.json()["status"] == "approved"
        missing = assembly(sdk_client, action_hash)
        assert missing.status_code == HTTPStatus.CONFLICT
        assert "1 of 2" in missing.json()["detail"]

        record, co_sig = alice.leg(content, threshold=2, roster=roster)
        attached = submit(
            sdk_client, action_hash, content, alice.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert attached.status_code == HTTPStatus.OK
        assert attached.json()["approved_count"] == 2
        parts = assembly(sdk_client, action_hash).json()
        assert len(parts["legs"]) == 2
        l1 = assemble_quorum_from_parts(
            agent.key, suspended_content=parts["suspended_content"],
            threshold=parts["threshold"], roster=parts["roster"], parts=parts["legs"],
        )  # fmt: skip
        assert verify_receipt(as_text(l1)).trust_level == "L1"
        assert push(l1, supersedes=action_hash).status_code == HTTPStatus.CREATED

    def test_a_second_attach_or_another_decision_or_another_approver_is_409(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        action_hash = content["action_hash"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        alice, bob, _ = approvers
        submit(sdk_client, action_hash, content, alice.token(content, scope=SCOPE))

        record, co_sig = alice.leg(content)
        reject = alice.token(content, scope=SCOPE, decision="rejected")
        rejecting = submit(
            sdk_client, action_hash, content, reject,
            decision="rejected", record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert rejecting.status_code == HTTPStatus.CONFLICT
        attached = submit(
            sdk_client, action_hash, content, alice.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert attached.status_code == HTTPStatus.OK
        second = submit(
            sdk_client, action_hash, content, alice.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert second.status_code == HTTPStatus.CONFLICT
        record, co_sig = bob.leg(content)
        other = submit(
            sdk_client, action_hash, content, bob.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert other.status_code == HTTPStatus.CONFLICT
        assert ApprovalVote.objects.count() == 1
        assert ApprovalVote.objects.get().record == alice.record()
        assert assembly(sdk_client, action_hash).status_code == HTTPStatus.OK

    def test_a_rejection_has_no_leg_to_attach(self, cast, agent, push, sdk_client, approvers):
        receipt = suspended_receipt(agent)
        content = receipt["content"]
        assert push(receipt).status_code == HTTPStatus.CREATED
        alice = approvers[0]
        token = alice.token(content, scope=SCOPE, decision="rejected")
        submit(sdk_client, content["action_hash"], content, token)
        record, co_sig = alice.leg(content)
        attach = submit(
            sdk_client, content["action_hash"], content,
            alice.token(content, scope=SCOPE, decision="rejected"),
            decision="rejected", record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert attach.status_code == HTTPStatus.CONFLICT
        assert ApprovalVote.objects.get().record == ""

    def test_assembly_while_pending_says_not_yet_approved(
        self, cast, agent, push, sdk_client, approvers
    ):
        receipt = suspended_receipt(agent)
        assert push(receipt).status_code == HTTPStatus.CREATED
        response = assembly(sdk_client, receipt["content"]["action_hash"])
        assert response.status_code == HTTPStatus.CONFLICT
        assert "not yet approved" in response.json()["detail"]


# --- Registering approver keys ------------------------------------------------------------------


class TestApproverKeyRegistration:
    def test_registering_upserts_by_key_id_and_a_new_key_is_an_audited_rotation(
        self, cast, agent, sdk_client
    ):
        admin = approvers_write_client(cast)
        old, new = Approver("erin-old"), Approver("erin-new")
        created = register(admin, key_id="erin", public_key=old.public, label="Erin")
        assert created.status_code == HTTPStatus.OK
        assert created.json() == {
            "status": "registered", "key_id": "erin", "public_key": old.public,
            "label": "Erin", "change": "registered",
        }  # fmt: skip
        audit_rows = OrgAuditEvent.objects.filter(org=cast.acme).count()

        same = register(admin, key_id="erin", public_key=old.public, label="Erin")
        assert same.status_code == HTTPStatus.OK
        assert (same.json()["status"], same.json()["change"]) == ("registered", "unchanged")
        assert ApproverKey.objects.filter(org=cast.acme).count() == 1
        assert OrgAuditEvent.objects.filter(org=cast.acme).count() == audit_rows

        # The old key votes before the rotation; its vote stays in the history.
        content = suspended_receipt(agent)["content"]
        open_approval(sdk_client, content["action_hash"], rule_id=SCOPE)
        voted = submit(sdk_client, content["action_hash"], content, old.token(content, scope=SCOPE))
        assert voted.json()["status"] == "approved"

        rotated = register(admin, key_id="erin", public_key=new.public, label="Erin")
        assert rotated.status_code == HTTPStatus.OK
        assert rotated.json()["change"] == "rotated"
        assert rotated.json()["public_key"] == new.public
        keys = {key.public_key: key for key in ApproverKey.objects.filter(org=cast.acme)}
        assert keys[old.public].revoked_at is not None
        assert keys[new.public].revoked_at is None
        event = OrgAuditEvent.objects.get(org=cast.acme, kind="approver_key.rotated")
        assert event.detail["key_id"] == "erin"
        assert event.detail["previous_public_key"] == old.public
        assert event.detail["public_key"] == new.public
        assert ApprovalVote.objects.get().approver_public_key == old.public
        assert approval_of(content).status == "approved"

        # Afterwards only the new key votes.
        later = suspended_receipt(agent)["content"]
        open_approval(sdk_client, later["action_hash"], rule_id=SCOPE, threshold=1)
        refused = submit(sdk_client, later["action_hash"], later, old.token(later, scope=SCOPE))
        assert refused.status_code == HTTPStatus.FORBIDDEN
        accepted = submit(sdk_client, later["action_hash"], later, new.token(later, scope=SCOPE))
        assert accepted.status_code == HTTPStatus.OK

    @pytest.mark.parametrize(
        "placeholder", [PLACEHOLDER_DECISION_KEY, PLACEHOLDER_DECISION_KEY.rstrip("=")]
    )
    def test_the_public_placeholder_decision_key_is_refused(self, cast, placeholder):
        assert PLACEHOLDER_DECISION_KEY == "6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw="
        response = register(approvers_write_client(cast), key_id="gated", public_key=placeholder)
        assert response.status_code == HTTPStatus.CONFLICT
        assert "placeholder" in response.json()["detail"]
        assert not ApproverKey.objects.exists()

    @pytest.mark.parametrize("which", ["operator_key", "agent_identity"])
    def test_a_key_seen_producing_the_orgs_receipts_is_refused(self, cast, push, which):
        operator, stated = Agent(), Agent()
        receipt = resigned(operator, operator.receipt(), agent_identity=stated.identity)
        assert push(receipt).status_code == HTTPStatus.CREATED
        key = operator.identity if which == "operator_key" else stated.identity
        response = register(approvers_write_client(cast), key_id="sneaky", public_key=key)
        assert response.status_code == HTTPStatus.CONFLICT
        assert "operator" in response.json()["detail"]
        assert not ApproverKey.objects.exists()

    def test_without_approvers_write_the_403_names_the_scope_and_how_to_get_it(
        self, cast, sdk_client
    ):
        response = register(sdk_client, key_id="dave", public_key=Approver("dave").public)
        assert response.status_code == HTTPStatus.FORBIDDEN
        detail = response.json()["detail"]
        assert "approvers:write" in detail
        assert "issue_api_key" in detail
        assert "console" in detail
        assert not ApproverKey.objects.exists()


# --- Races on PostgreSQL -----------------------------------------------------------------------


def _sdk_client(cast: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    return client


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(4))
def test_first_votes_racing_a_key_registration_freeze_exactly_one_roster(cast, round_) -> None:
    team = [Approver(f"a{index}") for index in range(5)]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    late = Approver("late")
    content = suspended_receipt(Agent())["content"]
    action_hash = content["action_hash"]
    threshold = 4
    opened = open_approval(_sdk_client(cast), action_hash, rule_id=SCOPE, threshold=threshold)
    assert opened.status_code == HTTPStatus.CREATED
    voters = [*team, late]
    tokens = {approver.name: approver.token(content, scope=SCOPE) for approver in voters}
    admin_secret = api_key_issue(org=cast.acme, scopes=[Scope.APPROVERS_WRITE]).secret
    start = threading.Barrier(len(voters) + 1)

    def vote(approver: Approver) -> tuple[str, int]:
        try:
            client = _sdk_client(cast)
            start.wait()
            response = submit(client, action_hash, content, tokens[approver.name])
            return approver.name, response.status_code
        finally:
            connection.close()

    def register_late() -> tuple[str, int]:
        try:
            client = APIClient()
            client.credentials(HTTP_X_API_KEY=admin_secret)
            start.wait()
            response = register(client, key_id="late", public_key=late.public)
            return "register", response.status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(voters) + 1) as pool:
        futures = [pool.submit(vote, approver) for approver in voters]
        futures.append(pool.submit(register_late))
        answers = dict(future.result() for future in futures)

    assert answers.pop("register") == HTTPStatus.OK
    approval = Approval.objects.get(action_hash=action_hash)
    votes = list(ApprovalVote.objects.filter(approval=approval))
    # One roster, frozen once, from the keys eligible at that instant.
    assert approval.events.filter(kind="roster_frozen").count() == 1
    assert approval.roster_frozen_at is not None
    five = sorted(approver.public for approver in team)
    assert approval.roster in (five, sorted([*five, late.public]))
    assert all(vote.approver_public_key in approval.roster for vote in votes)
    # Counts are exact: every 200 is one vote, the threshold-crossing one resolves it.
    accepted = [name for name, status in answers.items() if status == HTTPStatus.OK]
    assert len(accepted) == len(votes) == approval.approved_count == threshold
    assert {vote.approver_public_key for vote in votes} == {
        approver.public for approver in voters if approver.name in accepted
    }
    assert approval.status == "approved"
    assert approval.events.filter(kind="resolved").count() == 1
    refused = {status for name, status in answers.items() if name not in accepted}
    assert refused <= {HTTPStatus.CONFLICT, HTTPStatus.FORBIDDEN}
    if late.public not in approval.roster:
        assert answers["late"] != HTTPStatus.OK


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(4))
def test_a_leg_attached_while_another_approver_votes_lands_beside_it(cast, round_) -> None:
    team = [Approver(name) for name in ("alice", "bob", "carol")]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    alice, bob, _ = team
    agent = Agent()
    content = suspended_receipt(agent)["content"]
    action_hash = content["action_hash"]
    client = _sdk_client(cast)
    open_approval(client, action_hash, rule_id=SCOPE, threshold=2)
    alice_token = alice.token(content, scope=SCOPE)
    first = submit(client, action_hash, content, alice_token)
    assert (first.status_code, first.json()["approved_count"]) == (HTTPStatus.OK, 1)
    roster = list(Approval.objects.get(action_hash=action_hash).roster)
    alice_leg = alice.leg(content, threshold=2, roster=roster)
    bob_leg = bob.leg(content, threshold=2, roster=roster)
    bob_token = bob.token(content, scope=SCOPE)
    start = threading.Barrier(2)

    def send(token: str, leg: tuple[str, str]) -> int:
        try:
            caller = _sdk_client(cast)
            start.wait()
            response = submit(caller, action_hash, content, token, record=leg[0], co_sig_b64=leg[1])
            return response.status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        attach = pool.submit(send, alice_token, alice_leg)
        vote = pool.submit(send, bob_token, bob_leg)
        statuses = (attach.result(), vote.result())

    assert statuses == (HTTPStatus.OK, HTTPStatus.OK)
    approval = Approval.objects.get(action_hash=action_hash)
    assert (approval.status, approval.approved_count) == ("approved", 2)
    stored = {vote.approver_public_key: vote for vote in approval.votes.all()}
    assert set(stored) == {alice.public, bob.public}
    assert (stored[alice.public].record, stored[alice.public].co_sig_b64) == alice_leg
    assert (stored[bob.public].record, stored[bob.public].co_sig_b64) == bob_leg
    parts = assembly(client, action_hash)
    assert parts.status_code == HTTPStatus.OK
    body = parts.json()
    assert len(body["legs"]) == 2
    l1 = assemble_quorum_from_parts(
        agent.key, suspended_content=body["suspended_content"], threshold=body["threshold"],
        roster=body["roster"], parts=body["legs"],
    )  # fmt: skip
    assert verify_receipt(as_text(l1)).trust_level == "L1"
