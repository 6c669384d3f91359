"""A 2-of-3 co-signed policy deploy completed from the console's signing page in Chromium:
the browser recomputes the statement's canonical bytes and signs its vote with its
non-extractable device key; and /verify checks the served approvals in the browser."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from apps.approvals.services import approver_key_register
from apps.policy.models import PolicyProposal, ProposalStatus
from apps.policy.selectors import policy_active
from apps.policy.services import policy_deploy
from apps.tenancy.audit_trail import Actor
from apps.tenancy.services import org_set_policy_quorum
from tests.console.test_approve_page import browser_key, login
from tests.policy.test_cosigned_deploys import Device
from tests.policy.test_policy_api import ALLOW_SEARCH


@pytest.fixture
def key_page(page, live_server) -> Any:
    page.goto(f"{live_server.url}/approve/")
    page.wait_for_function("window.mirrorApprover !== undefined")
    return page


def test_a_2_of_3_deploy_completed_from_the_signing_page_verifies_on_verify(
    cast,
    key_page,
    live_server,
) -> None:
    public = browser_key(key_page)
    approver_key_register(org=cast.acme, public_key=public, key_id="browser")
    alice, bob = Device("alice"), Device("bob")
    for device in (alice, bob):
        approver_key_register(org=cast.acme, public_key=device.public, key_id=device.name)
    org_set_policy_quorum(org=cast.acme, quorum=2)
    manager = get_user_model().objects.get(username="acme-manager")
    change = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH, actor=Actor.console(manager))
    assert change.proposal is not None
    policy_id = change.version.policy_id
    statement = {
        "type": "countersign.policy_change/v1",
        "org": "acme",
        "policy_hash": change.version.policy_hash,
        "previous_policy_hash": "",
        "policy_id": policy_id,
    }
    sdk = APIClient()
    sdk.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    first = sdk.post(f"/v1/policy/proposals/{policy_id}/votes",
                     {"token_b64": alice.token(statement)}, format="json")  # fmt: skip
    assert first.status_code == 200, first.json()

    login(key_page, live_server, "acme-viewer")
    key_page.goto(f"{live_server.url}/approve/policy/{policy_id}")
    key_page.wait_for_selector("body[data-ready='yes']")
    shown = key_page.inner_text("main")
    assert "exactly the bytes your vote signs" in shown
    assert "1 of 2" in shown
    assert json.loads(key_page.inner_text("#statement")) == statement
    key_page.click("#approve")
    key_page.wait_for_selector("#vote-result[data-outcome='recorded']")
    assert key_page.inner_text("#status") == "activated"

    proposal = PolicyProposal.objects.get()
    assert proposal.status == ProposalStatus.ACTIVATED
    assert {vote.approver_public_key for vote in proposal.votes.all()} == {alice.public, public}
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH

    served = sdk.get(f"/v1/policy/approvals/{change.version.policy_hash}").json()
    key_page.goto(f"{live_server.url}/verify")
    key_page.wait_for_function("typeof window.mirrorVerifyPolicyApprovals === 'function'")
    verdict: dict[str, Any] = key_page.evaluate(
        "(value) => window.mirrorVerifyPolicyApprovals(value)", served
    )
    assert (verdict["kind"], verdict["approvals"], verdict["quorum"]) == ("PolicyApproved", 2, 2)
    # One approval dropped, or a token re-signed over other bytes: not approved.
    fewer = {**served, "votes": served["votes"][:1]}
    verdict = key_page.evaluate("(value) => window.mirrorVerifyPolicyApprovals(value)", fewer)
    assert verdict["kind"] == "PolicyNotApproved"
    other = dict(statement, previous_policy_hash="00" * 32)
    forged_vote = {**served["votes"][0], "token_b64": alice.token(other)}
    forged = {**served, "votes": [forged_vote, served["votes"][1]]}
    verdict = key_page.evaluate("(value) => window.mirrorVerifyPolicyApprovals(value)", forged)
    assert verdict["kind"] == "PolicyNotApproved"
    assert any("does not verify" in (v.get("detail") or "") for v in verdict["votes"])
    # Pasted into the page, the served answer is recognised and shown approved.
    key_page.fill("#input", json.dumps(served))
    key_page.click("#verify")
    key_page.wait_for_selector("#result[data-summary='PolicyApproved']")
    assert base64.b64decode(served["statement_b64"])
