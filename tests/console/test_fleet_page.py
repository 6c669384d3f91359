"""The fleet page in headless Chromium at 1366 px: which agents (API keys, with the SDK's
user agent) enforce which policy version, which have not pulled since the last deploy, and
the suspensions decided under a replaced policy; and who may read it."""

from __future__ import annotations

import os
from http import HTTPStatus
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from apps.policy.services import policy_deploy
from apps.tenancy.services import api_key_issue
from tests.approvals.conftest import suspended_receipt
from tests.console.test_console_screens import LAYOUT_PROBLEMS
from tests.interop.corpus import CORPUS
from tests.policy.test_policy_api import ALLOW_SEARCH
from tests.receipts.factories import Agent

WIDTH = 1366
# FLEET_SHOT=path: a full-page screenshot of the fleet, for review.
SHOT = os.environ.get("FLEET_SHOT")
# A real SDK's user agent can be long; the page wraps it rather than scrolling sideways.
LONG_AGENT = "heso/0.5.1 (CPython 3.11.7; Linux x86_64; " + "plugin/1.0 " * 12 + ")"


def suspended_under(policy_hash: str) -> dict[str, Any]:
    """A payment the policy ``policy_hash`` routed to a human, with its signed suspension
    block (receipts.md §2.5), waiting until 2099."""
    agent = Agent()
    content = {k: v for k, v in suspended_receipt(agent)["content"].items() if k != "action_hash"}
    content["suspension"] = {
        "resume_token_hash": "a" * 64,
        "context_ref": {"scheme": "none", "key": "k", "hash": "h"},
        "policy": {"policy_id": "pol_" + policy_hash[:24], "policy_hash": policy_hash,
                   "rule": "payments.review"},
        "approval": {"sla": "PT1H", "expires_at": "2099-01-01T00:00:00Z", "on_timeout": "deny",
                     "approver_pubkeys": []},
    }  # fmt: skip
    return agent.sign(content)


def pull(secret: str, user_agent: str) -> None:
    response = APIClient().get("/v1/policy/pull", HTTP_X_API_KEY=secret, HTTP_USER_AGENT=user_agent)
    assert response.status_code == HTTPStatus.OK


@pytest.fixture
def fleet(cast, push) -> dict[str, Any]:
    """acme enforced the corpus policy; one key follows the next deploy, one lags, one
    never pulled; a suspension decided under the corpus policy is still pending."""
    corpus = policy_deploy(org=cast.acme, toml=CORPUS["policy_toml"]).version
    assert corpus.policy_hash == CORPUS["policy_hash"]
    pull(cast.acme_key.secret, LONG_AGENT)
    pull(cast.acme_policy_only_key.secret, "custom-agent/2")
    suspended = suspended_under(corpus.policy_hash)
    assert push(suspended).status_code == HTTPStatus.CREATED
    active = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    pull(cast.acme_key.secret, LONG_AGENT)
    never = api_key_issue(org=cast.acme, scopes=["policy:read"], label="night batch")
    return {"corpus": corpus, "active": active, "never": never, "suspended": suspended}


def sign_in(page: Any, live_server: Any, role: str) -> None:
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", f"acme-{role}")
    page.fill("#id_password", f"pw-{role}")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/admin/tenancy/org/*/dashboard/")


def row(page: Any, prefix: str) -> str:
    return str(page.locator(f"#fleet-agents tr[data-key='{prefix}']").inner_text())


@pytest.mark.django_db(transaction=True)
def test_a_viewer_reads_the_fleet_at_1366_px(page, live_server, cast, fleet) -> None:
    sign_in(page, live_server, "viewer")
    page.click("#fleet-link")
    page.wait_for_url(f"**/admin/tenancy/org/{cast.acme.pk}/fleet/")

    active, corpus = fleet["active"], fleet["corpus"]
    assert active.policy_id in page.inner_text("#fleet-active")
    summary = page.inner_text("#fleet-summary")
    assert "Agents (API keys)\n3" in summary
    assert "On the active version\n1" in summary
    assert "On a replaced version\n1" in summary
    assert "Not pulled since the last deploy\n2" in summary
    assert "Suspensions under a replaced policy\n1" in summary

    following = row(page, cast.acme_key.api_key.prefix)
    assert active.policy_id in following
    assert "heso/0.5.1 (CPython 3.11.7" in following
    assert "current" in following
    assert "not pulled" not in following
    lagging = row(page, cast.acme_policy_only_key.api_key.prefix)
    assert corpus.policy_id in lagging
    assert "custom-agent/2" in lagging
    assert "replaced version" in lagging
    assert "not pulled" in lagging
    never = row(page, fleet["never"].api_key.prefix)
    assert "night batch" in never
    assert "never pulled" in never
    # The replaced version first: what needs attention is at the top.
    first = page.locator("#fleet-agents tbody tr").first.get_attribute("data-key")
    assert first == cast.acme_policy_only_key.api_key.prefix
    # Hashes are shortened, the full one on hover.
    assert page.locator(f"#fleet-agents code[title='{corpus.policy_hash}']").count() == 1

    suspensions = page.inner_text("#fleet-suspensions")
    assert corpus.policy_id in suspensions
    link = page.locator("#fleet-suspensions a", has_text="signing page")
    assert link.count() == 1

    if SHOT:
        page.screenshot(path=SHOT, full_page=True)
    assert page.evaluate(LAYOUT_PROBLEMS) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH


@pytest.mark.django_db(transaction=True)
def test_the_sidebar_entry_leads_a_member_to_their_orgs_fleet(page, live_server, cast) -> None:
    sign_in(page, live_server, "owner")
    page.click("text=Fleet: who enforces what")
    page.wait_for_url(f"**/admin/tenancy/org/{cast.acme.pk}/fleet/")
    assert "No API key with the policy read scope yet" not in page.inner_text("#fleet-agents")
    assert "None: every pending approval" in page.inner_text("#fleet-no-suspensions")


def test_another_orgs_fleet_is_not_found_and_a_stranger_is_sent_to_sign_in(cast) -> None:
    client = Client()
    url = reverse("admin:tenancy_org_fleet", args=[cast.globex.pk])
    assert client.get(url).status_code == HTTPStatus.FOUND  # to the sign-in page
    assert client.login(username="acme-viewer", password="pw-viewer")
    assert client.get(url).status_code == HTTPStatus.NOT_FOUND
    own = client.get(reverse("admin:tenancy_org_fleet", args=[cast.acme.pk]))
    assert own.status_code == HTTPStatus.OK
    assert b"No API key with the policy read scope yet" not in own.content
