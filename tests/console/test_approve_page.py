"""The approver page: byte equality with the Python token and co-sign builders, real
approvals voted from Chromium with a browser-held, non-extractable key, and a settled or
expired approval shown as its outcome alone (no action content, no vote form)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import struct
import time
from datetime import datetime, timedelta
from http import HTTPStatus
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.test import Client
from django.utils import timezone

from apps.approvals.models import Approval, ApprovalStatus
from apps.approvals.selectors import approval_get, approval_roster
from apps.approvals.services import (
    approval_assembly,
    approval_open,
    approval_vote,
    approver_key_register,
)
from apps.approvals.tokens import assemble_quorum_from_parts
from apps.console.services import access_token_digest, approval_by_access_token
from apps.receipts.verifier import verify_receipt
from apps.tenancy.org_context import activate_default, activate_orgs
from tests.approvals.conftest import Approver
from tests.conftest import is_postgres
from tests.receipts.factories import Agent

VECTORS = Path(__file__).resolve().parents[1] / "data" / "vectors"


def vector_cases(name: str, *ops: str) -> list[dict[str, Any]]:
    cases = json.loads((VECTORS / f"{name}.json").read_text())["cases"]
    return [case for case in cases if case["op"] in ops]


@pytest.fixture
def key_page(page, live_server) -> Any:
    page.goto(f"{live_server.url}/approve/")
    page.wait_for_function("window.mirrorApprover !== undefined")
    return page


def test_token_messages_built_in_the_browser_equal_the_reference(key_page) -> None:
    cases = [
        c for c in vector_cases("approval_tokens", "verify_approval_token") if c.get("derived")
    ]
    items = []
    for case in cases:
        token = bytes.fromhex(case["inputs"]["token_hex"])
        nonce, expiry, tag, scope_len = struct.unpack_from(">32sQBI", token)
        items.append(
            [
                nonce.hex(),
                str(expiry),
                {1: "approved", 2: "rejected"}[tag],
                token[45 : 45 + scope_len].decode(),
                case["inputs"]["action_canonical_hex"],
            ]
        )
    got = key_page.evaluate(
        "(items) => items.map((i) => window.mirrorApprover.tokenMessageHex(...i))", items
    )
    assert got == [case["derived"]["signed_payload_hex"] for case in cases]
    assert len(cases) >= 5


def test_cosign_payloads_built_in_the_browser_equal_the_reference(key_page) -> None:
    cases = vector_cases("cosign", "l1_cosign_payload", "quorum_cosign_payload")
    got = key_page.evaluate(
        """(cases) => cases.map((c) => c.op === "l1_cosign_payload"
            ? window.mirrorApprover.l1PayloadHex(
                c.inputs.suspended_content_json, c.inputs.approver_record_json)
            : window.mirrorApprover.quorumPayloadHex(
                c.inputs.suspended_content_json, c.inputs.threshold,
                JSON.parse(c.inputs.roster_json), c.inputs.approver_record_json))""",
        cases,
    )
    for case, result in zip(cases, got, strict=True):
        assert result["ok"] is case["expected"]["ok"], case["name"]
        if result["ok"]:
            assert result["payload_hex"] == case["expected"]["payload_hex"], case["name"]
    assert len(cases) == 12


def browser_key(page: Any) -> str:
    """Create (or read) the browser's approver key on the key page, as a person would."""
    if page.evaluate("() => window.mirrorApprover.publicKey()") is None:
        page.click("#create-key")
    page.wait_for_selector("body[data-key='ready']")
    public: str = page.inner_text("#public-key").strip()
    assert public == page.evaluate("() => window.mirrorApprover.publicKey()")
    return public


RULE = "payment.large.requires_approval"


def suspended_receipt(
    agent: Agent, *, suspension: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    content = agent.content()
    content["action"]["fields"] = {"amount_minor": 125_000, "payee": "ACME GmbH", **fields}
    content["policy"] = {
        "rule_id": RULE,
        "rule_display": "When any agent performs payment over 1000, then require approval.",
        "matched_conditions": [{"field": "amount_minor", "op": "gt", "value": 100_000}],
        "decision_path": "require_approval",
    }
    if suspension is not None:
        content["suspension"] = suspension
    return agent.sign(content)


def signed_timing(expires_at: datetime, on_timeout: str) -> dict[str, Any]:
    """A suspension block whose signed approval terms expire at ``expires_at``."""
    return {
        "resume_token_hash": "ab" * 32,
        "context_ref": {"scheme": "none", "key": "k", "hash": "cd" * 32},
        "policy": {"policy_id": "pol_" + "0" * 24, "policy_hash": "0" * 64, "rule": RULE},
        "approval": {
            "sla": "PT1H",
            "expires_at": expires_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "on_timeout": on_timeout,
            "approver_pubkeys": [],
        },
    }


def stored_content(receipt: dict[str, Any]) -> dict[str, Any]:
    decoded = verify_receipt(json.dumps(receipt)).receipt
    assert decoded is not None
    content: dict[str, Any] = orjson.loads(decoded.stored_text)["content"]
    return content


def open_with_token(
    cast: Any, receipt: dict[str, Any], threshold: int = 1, expires_at: datetime | None = None
) -> tuple[str, str]:
    """Open an approval as the team-path ``POST /v1/approvals`` does: a one-time token."""
    token = secrets.token_urlsafe(32)
    opened = approval_open(
        org=cast.acme,
        action_hash=receipt["content"]["action_hash"],
        threshold=threshold,
        suspended_content=stored_content(receipt),
        expires_at=expires_at,
        access_token_digest=access_token_digest(token),
    )
    return token, opened.approval.action_hash


def test_a_team_path_approval_is_approved_from_the_browser(cast, key_page, live_server) -> None:
    public = browser_key(key_page)
    approver_key_register(org=cast.acme, public_key=public, key_id="browser")
    receipt = suspended_receipt(Agent(), note="wire to supplier")
    token, action_hash = open_with_token(cast, receipt)

    key_page.goto(f"{live_server.url}/approve/{token}")
    key_page.wait_for_selector("body[data-ready='yes']")
    shown = key_page.inner_text("main")
    for text in ("payment.large.requires_approval", "ops/nightly", "search", "ACME GmbH"):
        assert text in shown
    assert "1 of 1 eligible approver (one signature finalizes it)" in shown
    key_page.fill("#reason", "invoice checked")
    key_page.click("#approve")
    key_page.wait_for_selector("#vote-result[data-outcome='recorded']")
    assert key_page.inner_text("#status") == "approved"
    # The vote settled it: from now on the page shows the outcome only.
    key_page.wait_for_selector("#outcome[data-state='approved']")
    assert_only_the_outcome(key_page.content(), receipt)
    single = "1 of 1 eligible approver (one signature finalizes it)"
    assert single in key_page.inner_text("#outcome")
    assert "Your approval was recorded." in key_page.inner_text("main")

    approval = approval_get(org=cast.acme, action_hash=action_hash)
    assert approval.status == ApprovalStatus.APPROVED
    vote = approval.votes.get()
    assert vote.approver_public_key == public
    assert vote.record == ""  # a team-path vote is the token alone


def test_a_rejection_from_the_browser_rejects(cast, key_page, live_server) -> None:
    public = browser_key(key_page)
    approver_key_register(org=cast.acme, public_key=public, key_id="browser")
    receipt = suspended_receipt(Agent())
    token, action_hash = open_with_token(cast, receipt)
    key_page.goto(f"{live_server.url}/approve/{token}")
    key_page.wait_for_selector("body[data-ready='yes']")
    key_page.click("#reject")
    key_page.wait_for_selector("#vote-result[data-outcome='recorded']")
    assert approval_get(org=cast.acme, action_hash=action_hash).status == ApprovalStatus.REJECTED
    key_page.wait_for_selector("#outcome[data-state='rejected']")
    assert_only_the_outcome(key_page.content(), receipt)


def test_a_key_not_on_the_roster_cannot_vote(cast, key_page, live_server) -> None:
    browser_key(key_page)  # created but never registered
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    token, _ = open_with_token(cast, suspended_receipt(Agent()))
    key_page.goto(f"{live_server.url}/approve/{token}")
    key_page.wait_for_selector("body[data-ready='no']")
    assert "not on this approval's roster" in key_page.inner_text("#vote-result")


def login(page: Any, live_server: Any, username: str) -> None:
    """Carry a Django session of ``username`` into the browser (the console's login)."""
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    activate_default()
    cookie = client.cookies["sessionid"]
    page.context.add_cookies([{"name": "sessionid", "value": cookie.value, "url": live_server.url}])


def test_a_key_scoped_quorum_is_completed_from_the_console_and_assembles(
    cast, key_page, live_server
) -> None:
    public = browser_key(key_page)
    approver_key_register(org=cast.acme, public_key=public, key_id="browser")
    alice = Approver("alice")
    approver_key_register(
        org=cast.acme, public_key=alice.public, key_id="alice", label="Alice's laptop"
    )
    agent = Agent()
    receipt = suspended_receipt(agent)
    content = stored_content(receipt)
    action_hash = receipt["content"]["action_hash"]
    approval = approval_open(
        org=cast.acme, action_hash=action_hash, threshold=2, suspended_content=content
    ).approval
    record, co_sig = alice.leg(content, threshold=2, roster=approval_roster(approval))
    approval_vote(
        org=cast.acme,
        action_hash=action_hash,
        token=base64.b64decode(alice.token(content, scope=approval.rule_id)),
        action_content=content,
        record=record,
        co_sig_b64=co_sig,
    )

    login(key_page, live_server, "acme-viewer")
    key_page.goto(f"{live_server.url}/approve/{approval.approval_id}")
    key_page.wait_for_selector("body[data-ready='yes']")
    quorum = "2 of 2 eligible approvers (a quorum, each approver signing)"
    assert quorum in key_page.inner_text("main")
    # Keys are named as people know them (the device's label and key id), never raw keys.
    assert "Alice's laptop (alice)" in key_page.inner_text("#votes")
    roster = key_page.inner_text("#approval")
    assert "Alice's laptop (alice)" in roster
    assert "browser" in roster.split("roster", 1)[1]
    assert alice.public not in roster
    assert public not in roster
    assert "The roster freezes at the first counted vote" in key_page.inner_text("#roster-rule")
    key_page.fill("#reason", "second pair of eyes")
    key_page.click("#approve")
    key_page.wait_for_selector("#vote-result[data-outcome='recorded']")

    assert approval_get(org=cast.acme, action_hash=action_hash).status == ApprovalStatus.APPROVED
    parts = approval_assembly(org=cast.acme, action_hash=action_hash)
    assert {leg["approver_pubkey_b64"] for leg in parts["legs"]} == {alice.public, public}
    browser_leg = next(leg for leg in parts["legs"] if leg["approver_pubkey_b64"] == public)
    assert json.loads(browser_leg["record"])["reason"] == "second pair of eyes"
    l1 = assemble_quorum_from_parts(
        agent.key,
        suspended_content=parts["suspended_content"],
        threshold=parts["threshold"],
        roster=parts["roster"],
        parts=parts["legs"],
    )
    verdict = verify_receipt(json.dumps(l1))
    assert (verdict.kind, verdict.trust_level) == ("Valid", "L1")


def test_a_single_lane_console_vote_carries_a_leg_that_assembles(
    cast, key_page, live_server
) -> None:
    from apps.approvals.tokens import assemble_l1_from_parts

    public = browser_key(key_page)
    approver_key_register(org=cast.acme, public_key=public, key_id="browser")
    agent = Agent()
    receipt = suspended_receipt(agent)
    content = stored_content(receipt)
    approval = approval_open(
        org=cast.acme, action_hash=receipt["content"]["action_hash"], suspended_content=content
    ).approval
    login(key_page, live_server, "acme-owner")
    key_page.goto(f"{live_server.url}/approve/{approval.approval_id}")
    key_page.wait_for_selector("body[data-ready='yes']")
    key_page.click("#approve")
    key_page.wait_for_selector("#vote-result[data-outcome='recorded']")
    parts = approval_assembly(org=cast.acme, action_hash=approval.action_hash)
    (leg,) = parts["legs"]
    l1 = assemble_l1_from_parts(
        agent.key,
        suspended_content=parts["suspended_content"],
        record=leg["record"],
        approver_pubkey_b64=leg["approver_pubkey_b64"],
        co_sig_b64=leg["co_sig_b64"],
    )
    verdict = verify_receipt(json.dumps(l1))
    assert (verdict.kind, verdict.trust_level) == ("Valid", "L1")


# --- Settled and expired approvals: the outcome only ----------------------------------------


def action_texts(receipt: dict[str, Any]) -> list[str]:
    """What of the suspended action a page could show: none of it may appear once closed."""
    content = receipt["content"]
    action = content["action"]
    return [
        # The string values (a number could match a timestamp's digits) and the field names
        # that cannot occur on the page otherwise.
        *(value for value in action["fields"].values() if isinstance(value, str)),
        "amount_minor",
        "payee",
        action["tool_name"],
        action["target_host"],
        action["workflow"],
        action["account"],
        content["policy"]["rule_id"],
        content["policy"]["rule_display"],
        content["agent_identity"],
        content["action_hash"],
        "approval-data",
        "suspended_content",
    ]


def assert_only_the_outcome(html: str, receipt: dict[str, Any]) -> None:
    shown = [text for text in action_texts(receipt) if text in html]
    assert shown == []
    for control in ('id="approve"', 'id="reject"', 'id="reason"', 'id="key-panel"'):
        assert control not in html


def decided_by_alice(cast: Any, decision: str) -> tuple[str, dict[str, Any]]:
    """A team-path approval (its page token, its receipt) that alice settled with
    ``decision`` through the service, as the API would."""
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    receipt = suspended_receipt(Agent(), note="wire to supplier")
    token, action_hash = open_with_token(cast, receipt)
    content = stored_content(receipt)
    approval_vote(
        org=cast.acme,
        action_hash=action_hash,
        token=base64.b64decode(alice.token(content, scope=RULE, decision=decision)),
        action_content=content,
    )
    assert approval_get(org=cast.acme, action_hash=action_hash).status == decision
    return token, receipt


@pytest.mark.parametrize("decision", ["approved", "rejected"])
def test_a_settled_approval_page_shows_only_its_outcome(cast, decision) -> None:
    token, receipt = decided_by_alice(cast, decision)
    approval = approval_get(org=cast.acme, action_hash=receipt["content"]["action_hash"])
    response = Client().get(f"/approve/{token}")
    assert response.status_code == HTTPStatus.OK
    assert response["Cache-Control"] == "no-store"
    assert "connect-src 'self'" in response["Content-Security-Policy"]
    html = response.content.decode()
    assert_only_the_outcome(html, receipt)
    assert "approver.js" not in html
    assert f'<section id="outcome" data-state="{decision}">' in html
    assert approval.resolved_at is not None
    assert approval.resolved_at.isoformat() in html  # when it was decided
    assert "1 of 1 eligible approver (one signature finalizes it)" in html
    approvals, rejections = (1, 0) if decision == "approved" else (0, 1)
    assert f'<th>approvals</th><td class="mono">{approvals}</td>' in html
    assert f'<th>rejections</th><td class="mono">{rejections}</td>' in html


def test_an_expired_approval_page_shows_only_its_outcome(cast) -> None:
    receipt = suspended_receipt(Agent(), note="wire to supplier")
    past = timezone.now() - timedelta(minutes=5)
    token, action_hash = open_with_token(cast, receipt, expires_at=past)
    response = Client().get(f"/approve/{token}")
    assert response.status_code == HTTPStatus.OK
    html = response.content.decode()
    assert_only_the_outcome(html, receipt)
    assert '<section id="outcome" data-state="expired">' in html
    assert past.isoformat() in html
    assert "without a decision" in html
    assert approval_get(org=cast.acme, action_hash=action_hash).status == ApprovalStatus.EXPIRED


def test_an_escalated_approval_past_its_expiry_shows_only_its_outcome(cast) -> None:
    """on_timeout escalate keeps it pending (flagged), but it takes no more votes."""
    past = timezone.now() - timedelta(minutes=5)
    receipt = suspended_receipt(
        Agent(), suspension=signed_timing(past, "escalate"), note="wire to supplier"
    )
    token, action_hash = open_with_token(cast, receipt)
    response = Client().get(f"/approve/{token}")
    html = response.content.decode()
    assert_only_the_outcome(html, receipt)
    assert '<section id="outcome" data-state="expired">' in html
    assert "pending (escalated)" in html
    approval = approval_get(org=cast.acme, action_hash=action_hash)
    assert (approval.status, approval.flag) == (ApprovalStatus.PENDING, "escalated")


def test_a_pending_approval_page_still_shows_the_action(cast) -> None:
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    future = timezone.now() + timedelta(hours=1)
    receipt = suspended_receipt(
        Agent(), suspension=signed_timing(future, "deny"), note="wire to supplier"
    )
    token, _ = open_with_token(cast, receipt)
    html = Client().get(f"/approve/{token}").content.decode()
    assert 'id="outcome"' not in html
    for control in ('id="approve"', 'id="reject"', "approval-data", "approver.js"):
        assert control in html
    data = json.loads(html.split('id="approval-data" type="application/json">')[1].split("<")[0])
    assert data["status"] == "pending"
    assert json.loads(data["suspended_content"]) == stored_content(receipt)
    assert data["roster"] == [alice.public]  # the roster the first vote would freeze
    assert data["key_names"] == {alice.public: "alice"}


def watch_errors(page: Any) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def test_the_browser_shows_a_settled_approval_as_its_outcome_only(cast, page, live_server) -> None:
    errors = watch_errors(page)
    token, receipt = decided_by_alice(cast, "approved")
    page.goto(f"{live_server.url}/approve/{token}")
    page.wait_for_selector("#outcome[data-state='approved']")
    assert page.inner_text("#status") == "approved"
    assert_only_the_outcome(page.content(), receipt)
    assert "settled" in page.inner_text("main")
    assert page.locator("button").count() == 0
    assert errors == []


def test_the_browser_shows_an_expired_approval_as_its_outcome_only(cast, page, live_server) -> None:
    errors = watch_errors(page)
    receipt = suspended_receipt(Agent(), note="wire to supplier")
    token, _ = open_with_token(cast, receipt, expires_at=timezone.now() - timedelta(minutes=1))
    page.goto(f"{live_server.url}/approve/{token}")
    page.wait_for_selector("#outcome[data-state='expired']")
    assert page.inner_text("#status") == "expired"
    assert_only_the_outcome(page.content(), receipt)
    assert page.locator("button").count() == 0
    assert errors == []


def test_the_browser_shows_a_pending_approval_with_its_action(cast, key_page, live_server) -> None:
    errors = watch_errors(key_page)
    public = browser_key(key_page)
    approver_key_register(org=cast.acme, public_key=public, key_id="browser")
    receipt = suspended_receipt(Agent(), note="wire to supplier")
    token, _ = open_with_token(cast, receipt, expires_at=timezone.now() + timedelta(hours=1))
    key_page.goto(f"{live_server.url}/approve/{token}")
    key_page.wait_for_selector("body[data-ready='yes']")
    assert key_page.inner_text("#status") == "pending"
    assert key_page.locator("#outcome").count() == 0
    fields = json.loads(key_page.inner_text("#fields"))
    assert fields == receipt["content"]["action"]["fields"]
    action = key_page.inner_text("#action")
    for text in ("ops/nightly", "org/unit", "api.example.com", receipt["content"]["action_hash"]):
        assert text in action
    assert RULE in key_page.inner_text("#policy")
    assert key_page.is_enabled("#approve")
    assert key_page.is_enabled("#reject")
    assert errors == []


# --- Links and their authorization (Django test client; no browser) -----------------------


@pytest.fixture
def console_approval(cast) -> Approval:
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    receipt = suspended_receipt(Agent())
    return approval_open(
        org=cast.acme,
        action_hash=receipt["content"]["action_hash"],
        suspended_content=stored_content(receipt),
    ).approval


def test_an_unknown_token_is_not_found(client, db) -> None:
    response = client.get("/approve/" + secrets.token_urlsafe(32))
    assert response.status_code == HTTPStatus.NOT_FOUND
    response = client.post("/approve/nope/vote", "{}", content_type="application/json")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["error"] == "approval_not_found"


def test_a_console_link_needs_a_signed_in_member(client, console_approval) -> None:
    response = client.get(f"/approve/{console_approval.approval_id}")
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"].startswith("/admin/login/")


def test_another_orgs_member_gets_not_found(client, cast, console_approval) -> None:
    from apps.tenancy.models import Role
    from apps.tenancy.services import membership_add

    membership_add(org=cast.globex, username="globex-owner", role=Role.OWNER, password="pw")
    client.login(username="globex-owner", password="pw")
    activate_default()
    response = client.get(f"/approve/{console_approval.approval_id}")
    assert response.status_code == HTTPStatus.NOT_FOUND


def test_a_member_sees_the_page_with_its_policy(client, console_approval) -> None:
    client.login(username="acme-viewer", password="pw-viewer")
    activate_default()
    response = client.get(f"/approve/{console_approval.approval_id}")
    assert response.status_code == HTTPStatus.OK
    assert "connect-src 'self'" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "no-referrer"
    assert console_approval.action_hash in response.content.decode()


def test_a_vote_endpoint_refuses_a_forged_token_with_the_reason(cast, console_approval) -> None:
    client = Client(enforce_csrf_checks=False)
    client.login(username="acme-viewer", password="pw-viewer")
    activate_default()
    forged = base64.b64encode(os.urandom(200)).decode()
    response = client.post(
        f"/approve/{console_approval.approval_id}/vote",
        json.dumps({"token": forged}),
        content_type="application/json",
    )
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["error"]
    response = client.post(
        f"/approve/{console_approval.approval_id}/vote",
        json.dumps({"token": forged, "extra": 1}),
        content_type="application/json",
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST


def test_the_vote_endpoint_needs_the_csrf_token(cast, console_approval) -> None:
    client = Client(enforce_csrf_checks=True)
    client.login(username="acme-viewer", password="pw-viewer")
    activate_default()
    response = client.post(
        f"/approve/{console_approval.approval_id}/vote",
        json.dumps({"token": "AAAA"}),
        content_type="application/json",
    )
    assert response.status_code == HTTPStatus.FORBIDDEN


def test_a_token_resolves_without_any_org_context(cast) -> None:
    """Under row-level security the lookup works before the org is known (migration 0001)."""
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    receipt = suspended_receipt(Agent())
    token, action_hash = open_with_token(cast, receipt)
    activate_orgs(())
    try:
        if is_postgres():
            assert not Approval.objects.filter(action_hash=action_hash).exists()
        approval = approval_by_access_token(token)
        assert approval is not None
        assert approval.action_hash == action_hash
        assert approval_by_access_token(token + "x") is None
        assert approval_by_access_token("") is None
    finally:
        activate_default()


def test_an_expired_token_vote_is_refused(cast) -> None:
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    receipt = suspended_receipt(Agent())
    token, _ = open_with_token(cast, receipt)
    content = stored_content(receipt)
    stale = alice.token(
        content, scope="payment.large.requires_approval", expiry=int(time.time()) - 5
    )
    response = Client().post(
        f"/approve/{token}/vote", json.dumps({"token": stale}), content_type="application/json"
    )
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "expired" in response.json()["message"]


@pytest.mark.parametrize(
    ("profile", "status", "body"),
    [
        # The team-path API answers a vote after the expiry 410 {error, message}.
        ("teampath", HTTPStatus.GONE, {"error", "message"}),
        # The key-scoped API answers it 409 {detail}; the page's script reads error, message.
        ("keyscoped", HTTPStatus.CONFLICT, {"detail", "error", "message"}),
    ],
)
def test_a_vote_after_the_expiry_answers_with_the_profiles_own_mapping(
    cast, settings, profile, status, body
) -> None:
    settings.API_PROFILE = profile
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    receipt = suspended_receipt(Agent())
    token, _ = open_with_token(cast, receipt, expires_at=timezone.now() - timedelta(minutes=5))
    vote = alice.token(stored_content(receipt), scope="payment.large.requires_approval")
    response = Client().post(
        f"/approve/{token}/vote", json.dumps({"token": vote}), content_type="application/json"
    )
    assert response.status_code == status
    answer = response.json()
    assert set(answer) == body
    assert answer["error"] == "approval_expired"
    assert "expired" in answer["message"]
