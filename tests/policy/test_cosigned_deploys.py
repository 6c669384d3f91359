"""Co-signed deploys: with a policy quorum, a deploy is a proposal that activates when k
approver keys approved it with approval tokens over the change's statement (issue 32).

Tokens are minted by PyNaCl keys, as an approver's device would; the statement's bytes are
computed here with ``rfc8785`` (not the service's canonicalizer), and the approvals
served for a version are checked by a small verifier written in this module.
"""

from __future__ import annotations

import base64
import os
import struct
import time
from http import HTTPStatus
from typing import Any

import pytest
import rfc8785
from blake3 import blake3
from django.core.management import call_command
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey
from rest_framework.test import APIClient

from apps.approvals.services import approver_key_register, approver_key_revoke
from apps.events.models import Event
from apps.events.services import webhook_endpoint_create
from apps.policy.models import PolicyDeployment, PolicyProposal, ProposalStatus
from apps.policy.selectors import EMPTY_POLICY_HASH, policy_active
from apps.policy.services import policy_deploy
from apps.tenancy.models import AuditKind, OrgAuditEvent, Scope
from apps.tenancy.services import api_key_issue, org_set_policy_quorum
from tests.approvals.conftest import Approver
from tests.approvals.signing import sign_approval_token
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, rule_toml

ASK_SEARCH = rule_toml("search.ask", "tool_call", "require_approval")


def statement(org: str, policy_hash: str, previous: str) -> dict[str, str]:
    return {
        "type": "countersign.policy_change/v1",
        "org": org,
        "policy_hash": policy_hash,
        "previous_policy_hash": previous,
        "policy_id": "pol_" + policy_hash[:24],
    }


class Device(Approver):
    """An approver's device voting on policy changes: its tokens sign the statement's bytes
    as ``rfc8785`` computes them, with scope ``policy:deploy`` unless told otherwise."""

    def token(
        self,
        signed: dict[str, Any],
        *,
        decision: str = "approved",
        scope: str = "policy:deploy",
        expiry: int | None = None,
        nonce: bytes | None = None,
    ) -> str:
        return self.token_over(
            rfc8785.dumps(signed), scope=scope, decision=decision, expiry=expiry, nonce=nonce
        )


@pytest.fixture
def devices(cast) -> dict[str, Device]:
    team = {name: Device(name) for name in ("alice", "bob", "carol")}
    for device in team.values():
        approver_key_register(org=cast.acme, public_key=device.public, key_id=device.name)
    return team


@pytest.fixture
def quorum_2(cast, devices) -> None:
    org_set_policy_quorum(org=cast.acme, quorum=2)


def sdk(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=secret)
    return client


def propose(dashboard: Any, toml: str, role: str = "manager", **extra: Any) -> Any:
    return dashboard(role).post("/v1/policy", {"toml": toml, **extra}, format="json")


def vote(client: APIClient, policy_id: str, token: str) -> Any:
    return client.post(
        f"/v1/policy/proposals/{policy_id}/votes", {"token_b64": token}, format="json"
    )


def hash_of(toml: str) -> str:
    return blake3(toml.encode()).hexdigest()


# --- The offline verifier (independent of the service's code) -----------------------------


def verify_approvals_offline(
    served: dict[str, Any], *, toml: str, org: str, trusted_keys: set[str]
) -> list[str]:
    """Who approved ``toml`` for ``org``, from ``GET /v1/policy/approvals/{hash}`` alone:
    the statement must name this text and org; each token must be laid out as approvals.md
    §1, carry scope ``policy:deploy``, be signed by a trusted key over the statement's
    RFC 8785 bytes, and approve. Raises AssertionError when fewer than the quorum do."""
    wanted_hash = blake3(toml.encode()).hexdigest()
    signed = served["statement"]
    assert signed["type"] == "countersign.policy_change/v1"
    assert signed["org"] == org
    assert signed["policy_hash"] == wanted_hash
    assert signed["policy_id"] == "pol_" + wanted_hash[:24]
    canonical = rfc8785.dumps(signed)
    assert base64.b64decode(served["statement_b64"]) == canonical
    approvers: list[str] = []
    for entry in served["votes"]:
        token = base64.b64decode(entry["token_b64"])
        _nonce, _expiry, tag, scope_len = struct.unpack_from(">32sQBI", token)
        scope_end = 45 + scope_len
        assert len(token) == scope_end + 96
        scope = token[45:scope_end].decode()
        signature, public = token[scope_end : scope_end + 64], token[scope_end + 64 :]
        public_b64 = base64.b64encode(public).decode()
        message = b"heso-approval-token/v1\x00" + token[:scope_end] + canonical
        try:
            VerifyKey(public).verify(message, signature)
        except BadSignatureError:
            continue
        if scope == "policy:deploy" and tag == 0x01 and public_b64 in trusted_keys:
            approvers.append(public_b64)
    approvers = sorted(set(approvers))
    assert len(approvers) >= served["quorum"], (approvers, served["quorum"])
    return approvers


# --- The setting ------------------------------------------------------------------------------


def test_only_an_owner_sets_the_quorum_and_the_change_is_audited(cast, dashboard) -> None:
    assert dashboard("viewer").get("/v1/policy/quorum").json() == {"policy_quorum": 0}
    for role in ("viewer", "auditor", "manager"):
        refused = dashboard(role).put("/v1/policy/quorum", {"policy_quorum": 2}, format="json")
        assert refused.status_code == HTTPStatus.FORBIDDEN
    response = dashboard("owner").put("/v1/policy/quorum", {"policy_quorum": 2}, format="json")
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {"policy_quorum": 2}
    event = OrgAuditEvent.objects.get(org=cast.acme, kind=AuditKind.POLICY_QUORUM_SET)
    assert event.detail == {"policy_quorum": 2, "previous_policy_quorum": 0}
    assert event.actor == "acme-owner"
    assert event.via == "api"
    too_many = dashboard("owner").put("/v1/policy/quorum", {"policy_quorum": 33}, format="json")
    assert too_many.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    not_a_number = dashboard("owner").put(
        "/v1/policy/quorum", {"policy_quorum": "2"}, format="json"
    )
    assert not_a_number.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert sdk(cast.acme_key.secret).put("/v1/policy/quorum", {"policy_quorum": 0},
                                         format="json").status_code == 401  # fmt: skip


def test_the_command_sets_the_quorum(cast, capsys) -> None:
    call_command("set_policy_quorum", "acme", "3", "--actor", "ops")
    assert '"policy_quorum":3' in capsys.readouterr().out
    cast.acme.refresh_from_db()
    assert cast.acme.policy_quorum == 3
    event = OrgAuditEvent.objects.get(org=cast.acme, kind=AuditKind.POLICY_QUORUM_SET)
    assert (event.actor, event.via) == ("ops", "command")


def test_with_quorum_0_a_deploy_activates_as_before(cast, dashboard, devices) -> None:
    response = propose(dashboard, ALLOW_SEARCH)
    assert response.status_code == HTTPStatus.OK
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH
    assert not PolicyProposal.objects.exists()


# --- The 2-of-3 deploy, end to end ------------------------------------------------------------


def test_a_2_of_3_co_signed_deploy_through_the_api(cast, dashboard, devices, quorum_2) -> None:
    webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/x", event_types=["policy.deployed"]
    )
    response = propose(dashboard, ALLOW_SEARCH, expected_policy_hash=EMPTY_POLICY_HASH)
    assert response.status_code == HTTPStatus.ACCEPTED
    body = response.json()
    new_hash = hash_of(ALLOW_SEARCH)
    signed = statement("acme", new_hash, "")
    assert body["policy_id"] == "pol_" + new_hash[:24]
    assert body["policy_hash"] == new_hash
    assert body["previous_policy_hash"] == ""
    assert body["statement"] == signed
    assert base64.b64decode(body["statement_b64"]) == rfc8785.dumps(signed)
    assert body["scope"] == "policy:deploy"
    assert (body["status"], body["quorum"], body["approved_count"]) == ("open", 2, 0)
    assert body["votes"] == []
    # The change is replayed over the last 7 days of receipts as it is proposed.
    assert body["replay"]["days"] == 7
    replay = dashboard("manager").get(f"/v1/policy/replays/{body['replay']['replay_id']}")
    assert replay.status_code == HTTPStatus.OK, replay.json()
    assert (replay.json()["status"], replay.json()["policy_hash"]) == ("ready", new_hash)
    assert '+verb = "tool_call"' in body["diff"]
    # Proposed, not active: the SDK still pulls the fail-safe pin.
    pull = sdk(cast.acme_key.secret).get("/v1/policy/pull").json()
    assert pull["policy_hash"] == EMPTY_POLICY_HASH

    # Alice through the SDK plane (approvals:write).
    first = vote(sdk(cast.acme_key.secret), body["policy_id"], devices["alice"].token(signed))
    assert first.status_code == HTTPStatus.OK, first.json()
    assert (first.json()["status"], first.json()["approved_count"]) == ("open", 1)
    assert first.json()["roster"] == sorted(d.public for d in devices.values())
    assert policy_active(org=cast.acme).is_fail_safe
    # Bob through the dashboard plane (a viewer: the signature is the authority).
    second = vote(dashboard("viewer"), body["policy_id"], devices["bob"].token(signed))
    assert second.status_code == HTTPStatus.OK, second.json()
    assert (second.json()["status"], second.json()["approved_count"]) == ("activated", 2)
    assert [v["key_id"] for v in second.json()["votes"]] == ["alice", "bob"]

    # Active: the pull's answer is the one it always was.
    assert sdk(cast.acme_key.secret).get("/v1/policy/pull").json() == {
        "status": "policy",
        "policy_id": body["policy_id"],
        "policy_hash": new_hash,
        "toml": ALLOW_SEARCH,
    }
    deployment = PolicyDeployment.objects.get(org=cast.acme)
    assert deployment.deployed_by.username == "acme-manager"
    audit = OrgAuditEvent.objects.get(org=cast.acme, kind=AuditKind.POLICY_DEPLOYED)
    approvers = [{"key_id": "alice", "public_key": devices["alice"].public},
                 {"key_id": "bob", "public_key": devices["bob"].public}]  # fmt: skip
    assert audit.detail["approvers"] == approvers
    event = Event.objects.get(org=cast.acme, type="policy.deployed")
    assert event.payload["approvers"] == approvers
    assert event.payload["break_glass"] is False
    assert OrgAuditEvent.objects.filter(org=cast.acme, kind=AuditKind.POLICY_PROPOSED).count() == 1

    # Carol's late vote: the proposal takes no more.
    late = vote(sdk(cast.acme_key.secret), body["policy_id"], devices["carol"].token(signed))
    assert late.status_code == HTTPStatus.CONFLICT


def test_the_approvals_of_the_active_version_verify_offline(
    cast, dashboard, devices, quorum_2
) -> None:
    body = propose(dashboard, ALLOW_SEARCH).json()
    signed = body["statement"]
    vote(sdk(cast.acme_key.secret), body["policy_id"], devices["carol"].token(signed))
    vote(sdk(cast.acme_key.secret), body["policy_id"], devices["alice"].token(signed))
    pulled = sdk(cast.acme_policy_only_key.secret).get("/v1/policy/pull").json()

    served = sdk(cast.acme_policy_only_key.secret).get(
        f"/v1/policy/approvals/{pulled['policy_hash']}"
    )
    assert served.status_code == HTTPStatus.OK
    served_body = served.json()
    trusted = {device.public for device in devices.values()}
    approvers = verify_approvals_offline(
        served_body, toml=pulled["toml"], org="acme", trusted_keys=trusted
    )
    assert approvers == sorted([devices["alice"].public, devices["carol"].public])
    assert served_body["org"] == "acme"
    assert served_body["status"] == "activated"
    # The dashboard plane serves the same.
    assert dashboard("viewer").get(f"/v1/policy/approvals/{pulled['policy_hash']}").json() == (
        served_body
    )
    # A tampered answer fails the offline check: a token re-pointed at another key.
    forged = dict(served_body)
    forged["votes"] = [served_body["votes"][0]]
    with pytest.raises(AssertionError):
        verify_approvals_offline(forged, toml=pulled["toml"], org="acme", trusted_keys=trusted)
    with pytest.raises(AssertionError):
        verify_approvals_offline(served_body, toml=BLOCK_SEARCH, org="acme", trusted_keys=trusted)


def test_approvals_routes_authorization(cast, dashboard, devices, quorum_2) -> None:
    body = propose(dashboard, ALLOW_SEARCH).json()
    path = f"/v1/policy/proposals/{body['policy_id']}/votes"
    token = devices["alice"].token(body["statement"])
    assert APIClient().post(path, {"token_b64": token}, format="json").status_code == 401
    policy_only = sdk(cast.acme_policy_only_key.secret)
    refused = policy_only.post(path, {"token_b64": token}, format="json")
    assert refused.status_code == HTTPStatus.FORBIDDEN
    # Another org's proposal is not found, for its keys and its members.
    assert vote(sdk(cast.globex_key.secret), body["policy_id"], token).status_code == 404
    approvals = f"/v1/policy/approvals/{body['policy_hash']}"
    assert APIClient().get(approvals).status_code == 401
    no_read = api_key_issue(org=cast.acme, scopes=[Scope.RECEIPTS_WRITE])
    assert sdk(no_read.secret).get(approvals).status_code == HTTPStatus.FORBIDDEN
    # Not activated yet: nothing to serve.
    assert sdk(cast.acme_key.secret).get(approvals).status_code == HTTPStatus.NOT_FOUND
    assert vote(sdk(cast.acme_key.secret), body["policy_id"], token).status_code == 200
    assert vote(sdk(cast.acme_key.secret), body["policy_id"],
                devices["bob"].token(body["statement"])).status_code == 200  # fmt: skip
    assert sdk(cast.globex_key.secret).get(approvals).status_code == HTTPStatus.NOT_FOUND
    assert sdk(cast.acme_key.secret).get(approvals).status_code == HTTPStatus.OK
    bad = vote(sdk(cast.acme_key.secret), body["policy_id"], "not base64!")
    assert bad.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_the_deploy_command_proposes_with_a_quorum(cast, devices, quorum_2, tmp_path, capsys):
    path = tmp_path / "policy.toml"
    path.write_text(ALLOW_SEARCH)
    call_command("deploy_policy", "acme", str(path))
    out = capsys.readouterr().out
    assert '"status":"proposed"' in out
    assert PolicyProposal.objects.get(org=cast.acme).proposed_via == "command"
    assert policy_active(org=cast.acme).is_fail_safe


# --- Each refusal ---------------------------------------------------------------------------


def test_a_proposal_against_a_moved_pin_is_refused_409(cast, dashboard, devices, quorum_2):
    response = propose(dashboard, ALLOW_SEARCH, expected_policy_hash=hash_of(BLOCK_SEARCH))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["active_policy_hash"] == EMPTY_POLICY_HASH
    assert not PolicyProposal.objects.exists()


def test_a_second_proposal_is_refused_while_one_is_open(cast, dashboard, devices, quorum_2):
    first = propose(dashboard, ALLOW_SEARCH).json()
    second = propose(dashboard, BLOCK_SEARCH, role="owner")
    assert second.status_code == HTTPStatus.CONFLICT
    assert second.json()["open_policy_id"] == first["policy_id"]
    assert PolicyProposal.objects.count() == 1


@pytest.fixture
def open_proposal(cast, dashboard, devices, quorum_2) -> dict[str, Any]:
    body: dict[str, Any] = propose(dashboard, ALLOW_SEARCH).json()
    return body


def refusal(response: Any, status: HTTPStatus, words: str) -> None:
    assert response.status_code == status, response.json()
    assert words in response.json()["detail"], response.json()


def test_an_unregistered_key_is_refused(cast, open_proposal) -> None:
    stranger = Device("mallory")
    response = vote(sdk(cast.acme_key.secret), open_proposal["policy_id"],
                    stranger.token(open_proposal["statement"]))  # fmt: skip
    refusal(response, HTTPStatus.FORBIDDEN, "not registered")


def test_a_revoked_key_is_refused(cast, devices, open_proposal) -> None:
    approver_key_revoke(org=cast.acme, key_id="carol")
    response = vote(sdk(cast.acme_key.secret), open_proposal["policy_id"],
                    devices["carol"].token(open_proposal["statement"]))  # fmt: skip
    refusal(response, HTTPStatus.FORBIDDEN, "not registered")


def test_a_reused_nonce_is_refused(cast, dashboard, devices, open_proposal) -> None:
    nonce = os.urandom(32)
    signed = open_proposal["statement"]
    client = sdk(cast.acme_key.secret)
    assert vote(client, open_proposal["policy_id"],
                devices["alice"].token(signed, nonce=nonce)).status_code == 200  # fmt: skip
    assert vote(client, open_proposal["policy_id"],
                devices["bob"].token(signed)).status_code == 200  # fmt: skip
    # The next change: alice signs it under the nonce she already spent.
    body = propose(dashboard, BLOCK_SEARCH).json()
    response = vote(client, body["policy_id"], devices["alice"].token(body["statement"],
                                                                      nonce=nonce))  # fmt: skip
    refusal(response, HTTPStatus.FORBIDDEN, "nonce has been replayed")


def test_the_same_token_twice_is_a_replay(cast, devices, open_proposal) -> None:
    token = devices["alice"].token(open_proposal["statement"])
    client = sdk(cast.acme_key.secret)
    assert vote(client, open_proposal["policy_id"], token).status_code == 200
    refusal(vote(client, open_proposal["policy_id"], token), HTTPStatus.FORBIDDEN, "replayed")


def test_an_expired_token_is_refused(cast, devices, open_proposal) -> None:
    token = devices["alice"].token(open_proposal["statement"], expiry=int(time.time()) - 5)
    response = vote(sdk(cast.acme_key.secret), open_proposal["policy_id"], token)
    refusal(response, HTTPStatus.FORBIDDEN, "expired")


def test_a_second_vote_by_a_key_is_refused(cast, devices, open_proposal) -> None:
    client = sdk(cast.acme_key.secret)
    signed = open_proposal["statement"]
    assert vote(client, open_proposal["policy_id"],
                devices["alice"].token(signed)).status_code == 200  # fmt: skip
    again = vote(client, open_proposal["policy_id"], devices["alice"].token(signed))
    refusal(again, HTTPStatus.CONFLICT, "already voted")
    assert PolicyProposal.objects.get().approved_count == 1


def test_the_proposer_cannot_approve_their_own_change(cast, dashboard, devices, open_proposal):
    response = vote(dashboard("manager"), open_proposal["policy_id"],
                    devices["alice"].token(open_proposal["statement"]))  # fmt: skip
    refusal(response, HTTPStatus.FORBIDDEN, "nobody approves their own change")
    assert PolicyProposal.objects.get().approved_count == 0


def test_the_proposers_own_device_is_off_the_roster_whoever_submits_its_vote(
    cast, dashboard, devices, quorum_2
) -> None:
    from django.contrib.auth import get_user_model

    from apps.approvals.models import ApproverKey

    manager = get_user_model().objects.get(username="acme-manager")
    ApproverKey.objects.filter(org=cast.acme, key_id="alice").update(member=manager)
    proposal = propose(dashboard, ALLOW_SEARCH).json()  # by acme-manager, who holds alice
    # Submitted through the SDK plane (not the proposer's session), alice's vote still
    # does not count: her key is the proposer's, so it is not on the roster.
    refused = vote(sdk(cast.acme_key.secret), proposal["policy_id"],
                   devices["alice"].token(proposal["statement"]))  # fmt: skip
    assert refused.status_code == HTTPStatus.FORBIDDEN, refused.json()
    counted = vote(sdk(cast.acme_key.secret), proposal["policy_id"],
                   devices["bob"].token(proposal["statement"]))  # fmt: skip
    assert counted.status_code == HTTPStatus.OK, counted.json()
    stored = PolicyProposal.objects.get()
    assert sorted(stored.roster) == sorted([devices["bob"].public, devices["carol"].public])
    assert stored.approved_count == 1


def test_a_pending_key_enrolled_by_a_member_does_not_vote(cast, devices, quorum_2, dashboard):
    from apps.approvals.models import ApproverKey

    ApproverKey.objects.filter(org=cast.acme, key_id="carol").update(confirmed_at=None)
    proposal = propose(dashboard, ALLOW_SEARCH).json()
    refused = vote(sdk(cast.acme_key.secret), proposal["policy_id"],
                   devices["carol"].token(proposal["statement"]))  # fmt: skip
    assert refused.status_code == HTTPStatus.FORBIDDEN, refused.json()
    assert PolicyProposal.objects.get().approved_count == 0


def test_a_token_of_another_scope_is_refused(cast, devices, open_proposal) -> None:
    token = devices["alice"].token(open_proposal["statement"], scope="payments.review")
    response = vote(sdk(cast.acme_key.secret), open_proposal["policy_id"], token)
    refusal(response, HTTPStatus.FORBIDDEN, "does not exactly match required `policy:deploy`")


def test_a_token_over_other_statement_bytes_is_refused(cast, devices, open_proposal) -> None:
    client = sdk(cast.acme_key.secret)
    other = dict(open_proposal["statement"], previous_policy_hash=EMPTY_POLICY_HASH)
    refusal(vote(client, open_proposal["policy_id"], devices["alice"].token(other)),
            HTTPStatus.FORBIDDEN, "signature invalid")  # fmt: skip
    # The same members, not canonical (pretty-printed JSON): other bytes, refused too.
    raw = sign_approval_token(
        devices["alice"].key, nonce=os.urandom(32), expiry=int(time.time()) + 60,
        decision="approved", scope="policy:deploy",
        action_canonical=b'{"type": "countersign.policy_change/v1"}',
    )  # fmt: skip
    refusal(vote(client, open_proposal["policy_id"], base64.b64encode(raw).decode()),
            HTTPStatus.FORBIDDEN, "signature invalid")  # fmt: skip


def test_a_rejection_closes_the_proposal(cast, dashboard, devices, open_proposal) -> None:
    client = sdk(cast.acme_key.secret)
    signed = open_proposal["statement"]
    assert vote(client, open_proposal["policy_id"],
                devices["alice"].token(signed)).status_code == 200  # fmt: skip
    rejected = vote(client, open_proposal["policy_id"],
                    devices["carol"].token(signed, decision="rejected"))  # fmt: skip
    assert rejected.status_code == HTTPStatus.OK
    assert rejected.json()["status"] == "rejected"
    late = vote(client, open_proposal["policy_id"], devices["bob"].token(signed))
    refusal(late, HTTPStatus.CONFLICT, "rejected")
    assert policy_active(org=cast.acme).is_fail_safe
    assert OrgAuditEvent.objects.filter(kind=AuditKind.POLICY_PROPOSAL_CLOSED).count() == 1
    # Closed: another proposal may open.
    assert propose(dashboard, BLOCK_SEARCH).status_code == HTTPStatus.ACCEPTED


def test_the_roster_is_frozen_at_the_first_vote(cast, devices, open_proposal) -> None:
    client = sdk(cast.acme_key.secret)
    signed = open_proposal["statement"]
    assert vote(client, open_proposal["policy_id"],
                devices["alice"].token(signed)).status_code == 200  # fmt: skip
    late_comer = Device("dave")
    approver_key_register(org=cast.acme, public_key=late_comer.public, key_id="dave")
    refusal(vote(client, open_proposal["policy_id"], late_comer.token(signed)),
            HTTPStatus.FORBIDDEN, "roster")  # fmt: skip


def test_a_first_vote_with_fewer_keys_than_the_quorum_is_refused(cast, dashboard, devices):
    org_set_policy_quorum(org=cast.acme, quorum=4)
    body = propose(dashboard, ALLOW_SEARCH).json()
    response = vote(sdk(cast.acme_key.secret), body["policy_id"],
                    devices["alice"].token(body["statement"]))  # fmt: skip
    refusal(response, HTTPStatus.CONFLICT, "only 3 approver key(s)")


# --- Break-glass ------------------------------------------------------------------------------


def test_break_glass_activates_without_the_quorum_until_approved_after_the_fact(
    cast, dashboard, devices, quorum_2, client
) -> None:
    webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/x", event_types=["policy.break_glass"]
    )
    open_body = propose(dashboard, BLOCK_SEARCH).json()
    manager = propose(dashboard, ALLOW_SEARCH, break_glass_reason="incident 42")
    assert manager.status_code == HTTPStatus.FORBIDDEN
    blank = propose(dashboard, ALLOW_SEARCH, role="owner", break_glass_reason="   ")
    assert blank.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    response = propose(dashboard, ALLOW_SEARCH, role="owner", break_glass_reason="incident 42")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["toml"] == ALLOW_SEARCH
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH
    # The open proposal was made against a pin that moved: superseded.
    assert PolicyProposal.objects.get(version__policy_id=open_body["policy_id"]).status == (
        ProposalStatus.SUPERSEDED
    )
    glass = PolicyProposal.objects.get(status=ProposalStatus.BREAK_GLASS)
    assert glass.break_glass_reason == "incident 42"
    event = Event.objects.get(org=cast.acme, type="policy.break_glass")
    assert event.payload["reason"] == "incident 42"
    assert event.payload["activated_by"] == "acme-owner"
    audit = OrgAuditEvent.objects.get(kind=AuditKind.POLICY_BREAK_GLASS)
    assert audit.detail["reason"] == "incident 42"

    client.force_login(glass.proposed_by)
    dashboard_url = f"/admin/tenancy/org/{cast.acme.pk}/dashboard/"
    assert "incident 42" in client.get(dashboard_url).content.decode()

    # The quorum approves it after the fact: no longer shown.
    signed = statement("acme", hash_of(ALLOW_SEARCH), "")
    client_sdk = sdk(cast.acme_key.secret)
    glass_id = "pol_" + hash_of(ALLOW_SEARCH)[:24]
    assert vote(client_sdk, glass_id, devices["alice"].token(signed)).status_code == 200
    approved = vote(client_sdk, glass_id, devices["bob"].token(signed))
    assert approved.json()["status"] == "activated"
    assert approved.json()["break_glass"]["approved_after"] is not None
    assert "incident 42" not in client.get(dashboard_url).content.decode()
    assert PolicyDeployment.objects.filter(org=cast.acme).count() == 1


def test_break_glass_shows_until_replaced(cast, dashboard, devices, quorum_2, client) -> None:
    propose(dashboard, ALLOW_SEARCH, role="owner", break_glass_reason="outage")
    client.force_login(PolicyProposal.objects.get().proposed_by)
    dashboard_url = f"/admin/tenancy/org/{cast.acme.pk}/dashboard/"
    assert "outage" in client.get(dashboard_url).content.decode()
    body = propose(dashboard, BLOCK_SEARCH).json()
    assert vote(sdk(cast.acme_key.secret), body["policy_id"],
                devices["alice"].token(body["statement"])).status_code == 200  # fmt: skip
    assert vote(dashboard("viewer"), body["policy_id"],
                devices["carol"].token(body["statement"])).status_code == 200  # fmt: skip
    assert policy_active(org=cast.acme).toml == BLOCK_SEARCH
    assert "outage" not in client.get(dashboard_url).content.decode()
    # Replaced: the break-glass change takes no more votes.
    glass = PolicyProposal.objects.get(break_glass_at__isnull=False)
    assert glass.status == ProposalStatus.SUPERSEDED


def test_break_glass_without_a_quorum_is_refused(cast, dashboard) -> None:
    response = propose(dashboard, ALLOW_SEARCH, role="owner", break_glass_reason="why")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "need no approvals" in response.json()["detail"]


def test_the_service_keeps_the_active_text_a_no_op(cast, devices, quorum_2) -> None:
    org_set_policy_quorum(org=cast.acme, quorum=0)
    policy_deploy(org=cast.acme, toml=ASK_SEARCH)
    org_set_policy_quorum(org=cast.acme, quorum=2)
    change = policy_deploy(org=cast.acme, toml=ASK_SEARCH)
    assert change.activated
    assert change.proposal is None
    proposed = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    assert not proposed.activated
    assert proposed.proposal is not None
    assert proposed.proposal.previous_version is not None
    assert proposed.proposal.previous_version.toml == ASK_SEARCH


def test_the_evidence_export_carries_the_policy_approvals(cast, dashboard, devices, quorum_2):
    import json

    from tests.audit.test_evidence_export import unpack

    body = propose(dashboard, ALLOW_SEARCH).json()
    for name in ("alice", "bob"):
        vote(sdk(cast.acme_key.secret), body["policy_id"], devices[name].token(body["statement"]))
    response = dashboard("auditor").post("/v1/evidence/export", {}, format="json")
    (change,) = json.loads(unpack(response)["policy_approvals.json"])
    assert change["status"] == "activated"
    served = {**change, "statement_b64": base64.b64encode(rfc8785.dumps(change["statement"]))}
    trusted = {device.public for device in devices.values()}
    approvers = verify_approvals_offline(
        served, toml=ALLOW_SEARCH, org="acme", trusted_keys=trusted
    )
    assert approvers == sorted([devices["alice"].public, devices["bob"].public])
