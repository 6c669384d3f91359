"""A request member is read as the OpenAPI document types it: a string member takes a JSON
string, a boolean one ``true``/``false``, an integer one a JSON integer (DRF's own fields
would coerce ``0`` to ``"0"``, ``0`` to ``false``, ``"7"`` to ``7``, so a body the document
forbids was accepted). Each refusal is 422 in the key-scoped ``{"detail"}`` body and
names the member; nothing is written.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.approvals.models import Approval, ApproverKey
from apps.events.models import WebhookEndpoint
from apps.tenancy.models import Scope
from apps.tenancy.services import api_key_issue

HEX = "ab" * 32
KEY = "6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iX="


@pytest.fixture
def every_scope(cast: Any) -> APIClient:
    key = api_key_issue(org=cast.acme, scopes=list(Scope), label="every scope")
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key.secret)
    return client


def assert_refused(response: Any, member: str) -> None:
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, response.content
    assert response.json()["detail"].startswith(f"{member}: ")


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("rule_id", 0),
        ("workflow", 1),
        ("account", 2),
        ("scope", 0),
        ("matched_conditions", ["verb"]),
    ],
)
def test_an_approval_is_not_opened_on_a_member_of_another_type(every_scope, member, value):
    response = every_scope.post("/v1/approvals", {"action_hash": HEX, member: value}, format="json")
    assert_refused(response, member)
    assert not Approval.objects.exists()


def test_display_context_of_the_documented_types_still_opens_an_approval(every_scope):
    body = {
        "action_hash": HEX,
        "rule_id": "",
        "workflow": "payouts",
        "account": "acct-7",
        "scope": "payments",
        "matched_conditions": [{"field": "verb", "op": "eq", "value": "payment"}],
    }
    assert every_scope.post("/v1/approvals", body, format="json").status_code == HTTPStatus.CREATED


@pytest.mark.parametrize(("member", "value"), [("label", 0), ("key_id", 7)])
def test_an_approver_key_is_not_registered_on_a_member_of_another_type(every_scope, member, value):
    body = {"public_key": KEY, member: value}
    response = every_scope.post("/v1/orgs/register-approver-pubkey", body, format="json")
    assert_refused(response, member)
    assert not ApproverKey.objects.exists()


@pytest.mark.parametrize(
    ("member", "value"), [("enabled", 0), ("enabled", "true"), ("description", 0)]
)
def test_a_webhook_is_not_created_on_a_member_of_another_type(dashboard, member, value):
    body = {"url": "https://127.0.0.1/x", "event_types": ["approval.opened"], member: value}
    response = dashboard("manager").post("/v1/webhooks", body, format="json")
    assert_refused(response, member)
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("days", ["7", 7.0])
def test_a_preview_takes_its_days_as_a_json_integer(dashboard, days):
    body = {"toml": "", "days": days}
    assert_refused(dashboard("manager").post("/v1/policy/preview", body, format="json"), "days")
