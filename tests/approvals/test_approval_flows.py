"""Approvals end to end through HTTP: open, vote, assemble, finalize with supersede."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from apps.approvals.models import Approval, ApprovalVote
from apps.approvals.selectors import approval_roster, eligible_approvers
from apps.approvals.services import approver_key_revoke
from apps.approvals.tokens import assemble_l1_from_parts, assemble_quorum_from_parts
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_receipt
from tests.approvals.conftest import suspended_receipt
from tests.receipts.factories import Agent, as_text

SCOPE = "payments.review"


def submit(client, action_hash, content, token, **extra):
    body = {"token_b64": token, "action_content": content, **extra}
    return client.generic(
        "POST",
        f"/v1/approvals/{action_hash}/submit-token",
        json.dumps(body),
        content_type="application/json",
    )


@pytest.fixture
def agent() -> Agent:
    return Agent()


@pytest.fixture
def suspended(push, agent, approvers) -> dict:
    receipt = suspended_receipt(agent)
    assert push(receipt).status_code == HTTPStatus.CREATED
    return receipt


def test_pushing_a_suspended_receipt_opens_its_approval(cast, suspended, sdk_client) -> None:
    action_hash = suspended["content"]["action_hash"]
    response = sdk_client.get(f"/v1/approvals/{action_hash}")
    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert body["status"] == "pending"
    assert (body["threshold"], body["approved_count"], body["resolved_at"]) == (1, 0, None)
    approval = Approval.objects.get(org=cast.acme, action_hash=action_hash)
    assert approval.rule_id == SCOPE
    assert len(eligible_approvers(approval)) == 3
    # The SDK's own open after its push is the first explicit open: 201, same id; the
    # next one re-opens: 200.
    first = sdk_client.post("/v1/approvals", {"action_hash": action_hash}, format="json")
    assert first.status_code == HTTPStatus.CREATED
    assert first.json()["approval_id"] == body["approval_id"]
    again = sdk_client.post("/v1/approvals", {"action_hash": action_hash}, format="json")
    assert again.status_code == HTTPStatus.OK
    assert again.json()["approval_id"] == body["approval_id"]


def test_single_approver_flow_finalizes_an_l1_receipt_the_mirror_accepts(
    cast, suspended, sdk_client, approvers, agent, push
) -> None:
    content = suspended["content"]
    action_hash = content["action_hash"]
    alice = approvers[0]
    record, co_sig = alice.leg(content)
    # Before the vote, the assembly is not ready.
    assert sdk_client.get(f"/v1/approvals/{action_hash}/assembly").status_code == 409

    response = submit(
        sdk_client, action_hash, content, alice.token(content, scope=SCOPE),
        record=record, co_sig_b64=co_sig,
    )  # fmt: skip
    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert (body["status"], body["approved_count"]) == ("approved", 1)
    assert body["resolved_at"] is not None

    assembly = sdk_client.get(f"/v1/approvals/{action_hash}/assembly").json()
    assert assembly["threshold"] == 1
    assert assembly["legs"] == [
        {"record": record, "approver_pubkey_b64": alice.public, "co_sig_b64": co_sig}
    ]
    leg = assembly["legs"][0]
    l1 = assemble_l1_from_parts(
        agent.key,
        suspended_content=assembly["suspended_content"],
        record=leg["record"],
        approver_pubkey_b64=leg["approver_pubkey_b64"],
        co_sig_b64=leg["co_sig_b64"],
    )
    assert verify_receipt(as_text(l1)).trust_level == "L1"
    pushed = push(l1, supersedes=action_hash)
    assert pushed.status_code == HTTPStatus.CREATED, pushed.json()
    old = MirrorEntry.objects.get(org=cast.acme, action_hash=action_hash)
    assert old.superseded_by == l1["content"]["action_hash"]


def test_two_of_three_quorum_flow_assembles_and_supersedes(
    cast, agent, approvers, push, sdk_client
):
    receipt = suspended_receipt(agent)
    content = receipt["content"]
    action_hash = content["action_hash"]
    opened = sdk_client.post(
        "/v1/approvals", {"action_hash": action_hash, "rule_id": SCOPE, "threshold": 2},
        format="json",
    )  # fmt: skip
    assert opened.status_code == HTTPStatus.CREATED
    assert opened.json()["threshold"] == 2
    assert push(receipt).status_code == HTTPStatus.CREATED  # the push re-opens: no new one
    roster = approval_roster(Approval.objects.get(action_hash=action_hash))
    alice, bob, _ = approvers
    for index, approver in enumerate((alice, bob), start=1):
        record, co_sig = approver.leg(content, threshold=2, roster=roster)
        response = submit(
            sdk_client, action_hash, content, approver.token(content, scope=SCOPE),
            record=record, co_sig_b64=co_sig,
        )  # fmt: skip
        assert response.status_code == HTTPStatus.OK
        assert response.json()["approved_count"] == index
    assert response.json()["status"] == "approved"

    assembly = sdk_client.get(f"/v1/approvals/{action_hash}/assembly").json()
    assert len(assembly["legs"]) == 2
    assert assembly["roster"] == sorted(roster)
    l1 = assemble_quorum_from_parts(
        agent.key,
        suspended_content=assembly["suspended_content"],
        threshold=assembly["threshold"],
        roster=assembly["roster"],
        parts=assembly["legs"],
    )
    assert verify_receipt(as_text(l1)).trust_level == "L1"
    assert push(l1, supersedes=action_hash).status_code == HTTPStatus.CREATED


def test_one_rejection_resolves_it_rejected(suspended, sdk_client, approvers) -> None:
    content = suspended["content"]
    token = approvers[1].token(content, scope=SCOPE, decision="rejected")
    response = submit(sdk_client, content["action_hash"], content, token, decision="rejected")
    assert response.json()["status"] == "rejected"
    late = submit(
        sdk_client, content["action_hash"], content, approvers[0].token(content, scope=SCOPE)
    )
    assert late.status_code == HTTPStatus.CONFLICT


def test_the_same_approver_cannot_vote_twice(cast, agent, approvers, sdk_client) -> None:
    content = suspended_receipt(agent)["content"]
    sdk_client.post(
        "/v1/approvals", {"action_hash": content["action_hash"], "rule_id": SCOPE, "threshold": 2},
        format="json",
    )  # fmt: skip
    alice = approvers[0]
    assert (
        submit(
            sdk_client, content["action_hash"], content, alice.token(content, scope=SCOPE)
        ).status_code
        == 200
    )
    again = submit(sdk_client, content["action_hash"], content, alice.token(content, scope=SCOPE))
    assert again.status_code == HTTPStatus.CONFLICT
    assert ApprovalVote.objects.count() == 1


def test_a_replayed_nonce_is_403(cast, agent, approvers, sdk_client) -> None:
    content = suspended_receipt(agent)["content"]
    sdk_client.post(
        "/v1/approvals", {"action_hash": content["action_hash"], "rule_id": SCOPE, "threshold": 2},
        format="json",
    )  # fmt: skip
    token = approvers[0].token(content, scope=SCOPE)
    assert submit(sdk_client, content["action_hash"], content, token).status_code == 200
    replay = submit(sdk_client, content["action_hash"], content, token)
    assert replay.status_code == HTTPStatus.FORBIDDEN
    assert "replayed" in replay.json()["detail"]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda a, c: a.token(c, scope="other.rule"), "does not exactly match"),
        (lambda a, c: a.token(c, scope=SCOPE, expiry=1), "expired"),
        (lambda a, c: a.token(c, scope=SCOPE, decision="rejected"), "does not match required"),
        (lambda a, c: "AAAA", "too short"),
    ],
)
def test_token_failures_are_403_with_the_reason(suspended, sdk_client, approvers, mutate, reason):
    content = suspended["content"]
    token = mutate(approvers[0], content)
    # The SDK always declares the decision; the token's signed one must match it.
    response = submit(sdk_client, content["action_hash"], content, token, decision="approved")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert reason in response.json()["detail"]


def test_an_unregistered_or_revoked_key_is_403(cast, suspended, sdk_client, approvers) -> None:
    from tests.approvals.conftest import Approver

    content = suspended["content"]
    stranger = Approver("mallory")
    response = submit(
        sdk_client, content["action_hash"], content, stranger.token(content, scope=SCOPE)
    )
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "not registered" in response.json()["detail"]
    approver_key_revoke(org=cast.acme, key_id="alice")
    revoked = submit(
        sdk_client, content["action_hash"], content, approvers[0].token(content, scope=SCOPE)
    )
    assert revoked.status_code == HTTPStatus.FORBIDDEN


def test_content_that_does_not_hash_to_the_path_is_409(suspended, sdk_client, approvers) -> None:
    content = dict(suspended["content"])
    other = Agent().receipt()["content"]
    response = submit(
        sdk_client, content["action_hash"], other, approvers[0].token(content, scope=SCOPE)
    )
    assert response.status_code == HTTPStatus.CONFLICT


def test_a_threshold_above_the_eligible_keys_opens_but_its_first_vote_is_409(
    cast, agent, approvers, sdk_client
) -> None:
    content = suspended_receipt(agent)["content"]
    response = sdk_client.post(
        "/v1/approvals",
        {"action_hash": content["action_hash"], "threshold": 4, "rule_id": SCOPE},
        format="json",
    )
    assert response.status_code == HTTPStatus.CREATED
    vote = submit(
        sdk_client, content["action_hash"], content, approvers[0].token(content, scope=SCOPE)
    )
    assert vote.status_code == HTTPStatus.CONFLICT
    assert vote.json()["detail"] == (
        "the approval needs 4 approver(s) but only 3 approver key(s) are eligible: register "
        "more approver keys first"
    )
    assert ApprovalVote.objects.count() == 0


def test_unknown_members_are_ignored_when_opening(cast, agent, approvers, sdk_client) -> None:
    content = suspended_receipt(agent)["content"]
    response = sdk_client.post(
        "/v1/approvals",
        {"action_hash": content["action_hash"], "matched_conditions": [], "scope": "x"},
        format="json",
    )
    assert response.status_code == HTTPStatus.CREATED


def test_authorization_matrix(cast, suspended, dashboard, globex_push) -> None:
    action_hash = suspended["content"]["action_hash"]
    assert APIClient().get(f"/v1/approvals/{action_hash}").status_code == 401
    assert dashboard("owner").get(f"/v1/approvals/{action_hash}").status_code == 401
    policy_only = APIClient()
    policy_only.credentials(HTTP_X_API_KEY=cast.acme_policy_only_key.secret)
    assert policy_only.get(f"/v1/approvals/{action_hash}").status_code == 403
    globex = APIClient()
    globex.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.globex_key.secret}")
    assert globex.get(f"/v1/approvals/{action_hash}").status_code == 404
    assert globex.get(f"/v1/approvals/{action_hash}/assembly").status_code == 404
    assert globex.get("/v1/approvals/" + "0" * 64).status_code == 404


def test_registering_approver_keys_needs_the_separate_scope(cast, agent, push) -> None:
    from apps.tenancy.services import api_key_issue
    from tests.approvals.conftest import Approver

    default_key = APIClient()
    default_key.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    dave = Approver("dave")
    body = {"key_id": "dave", "public_key": dave.public.rstrip("="), "label": "Dave"}
    assert (
        default_key.post("/v1/orgs/register-approver-pubkey", body, format="json").status_code
        == 403
    )
    admin_key = APIClient()
    admin_key.credentials(
        HTTP_X_API_KEY=api_key_issue(org=cast.acme, scopes=["approvers:write"]).secret
    )
    created = admin_key.post("/v1/orgs/register-approver-pubkey", body, format="json")
    assert created.status_code == HTTPStatus.OK
    assert created.json() == {
        "status": "registered",
        "key_id": "dave",
        "public_key": dave.public,  # stored canonically, padded
        "label": "Dave",
        "change": "registered",
    }
    # An operator key seen in the org's receipts cannot become an approver.
    assert push(agent.receipt()).status_code == 201
    operator = {"public_key": agent.identity}
    refused = admin_key.post("/v1/orgs/register-approver-pubkey", operator, format="json")
    assert refused.status_code == HTTPStatus.CONFLICT
    short = admin_key.post(
        "/v1/orgs/register-approver-pubkey", {"public_key": "AAAA"}, format="json"
    )
    assert short.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_the_sdks_open_after_its_push_sets_the_quorum_threshold(
    cast, agent, approvers, push, sdk_client
):
    receipt = suspended_receipt(agent)
    action_hash = receipt["content"]["action_hash"]
    assert push(receipt).status_code == HTTPStatus.CREATED  # opens it provisionally, k = 1
    assert Approval.objects.get(action_hash=action_hash).provisional
    opened = sdk_client.post(
        "/v1/approvals", {"action_hash": action_hash, "rule_id": SCOPE, "threshold": 2},
        format="json",
    )  # fmt: skip
    assert opened.status_code == HTTPStatus.CREATED  # the first explicit open
    assert opened.json()["threshold"] == 2
    # Once confirmed, a later open with another threshold changes nothing.
    again = sdk_client.post(
        "/v1/approvals", {"action_hash": action_hash, "threshold": 3}, format="json"
    )
    assert again.json()["threshold"] == 2
