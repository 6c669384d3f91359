"""GET /v1/analytics against hand-computed fixtures."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

from django.utils import timezone
from rest_framework.test import APIClient

from apps.policy.services import policy_deploy
from tests.approvals.conftest import suspended_receipt
from tests.approvals.model_factories import ApprovalFactory
from tests.receipts.factories import Agent
from tests.receipts.model_factories import MirrorEntryFactory

KEYS = {
    "receipts_total", "receipts_month", "receipts_l1", "refusals", "supersedes",
    "approvals_pending", "approvals_approved", "approvals_rejected",
    "approval_median_seconds", "policy_age_days",
}  # fmt: skip


def counters(client) -> dict[str, dict]:
    response = client.get("/v1/analytics")
    assert response.status_code == HTTPStatus.OK
    return {counter["key"]: counter for counter in response.json()}


def test_an_empty_org_has_every_counter_at_zero(cast, dashboard) -> None:
    stats = counters(dashboard("viewer"))
    assert set(stats) == KEYS
    assert stats["receipts_total"]["value"] == 0
    assert stats["receipts_total"]["spark"] == [0] * 30
    assert stats["approval_median_seconds"]["value"] is None
    assert stats["policy_age_days"]["value"] is None
    assert stats["receipts_month"]["display"] == "0 / 250,000 (0.0% of quota)"


def test_counters_match_the_orgs_rows(cast, dashboard, push, globex_push, approvers) -> None:
    agent = Agent()
    for _ in range(3):
        assert push(agent.receipt()).status_code == 201
    suspended = suspended_receipt(agent)
    assert push(suspended).status_code == 201  # opens an approval too
    l1 = agent.approve_l1(suspended, approvers[0].key)
    assert push(l1, supersedes=suspended["content"]["action_hash"]).status_code == 201
    tampered = agent.receipt()
    tampered["content"]["action"]["tool_name"] = "other"
    assert push(tampered).status_code == HTTPStatus.CONFLICT
    assert push.raw('{"receipt": {"content": {}}}').status_code == 422
    assert globex_push(Agent().receipt()).status_code == 201  # another org: not counted
    # Approvals: the one opened by the push stays pending; two decided, 60 s and 180 s.
    now = timezone.now()
    for index, (status, seconds) in enumerate([("approved", 60), ("rejected", 180)]):
        ApprovalFactory(
            org=cast.acme,
            action_hash=f"{index:064x}",
            status=status,
            created_at=now - timedelta(seconds=seconds),
            resolved_at=now,
        )
    policy_deploy(org=cast.acme, toml="")

    stats = counters(dashboard("viewer"))

    assert stats["receipts_total"]["value"] == 5
    assert stats["receipts_month"]["value"] == 5
    assert stats["receipts_total"]["spark"][-1] == 5
    assert sum(stats["receipts_total"]["spark"]) == 5
    assert stats["receipts_l1"]["value"] == 1
    assert stats["supersedes"]["value"] == 1
    assert stats["refusals"]["value"] == 2
    assert "Malformed 1" in stats["refusals"]["label"]
    assert stats["approvals_pending"]["value"] == 1
    assert stats["approvals_approved"]["value"] == 1
    assert stats["approvals_rejected"]["value"] == 1
    assert stats["approval_median_seconds"]["value"] == 120
    assert stats["policy_age_days"]["value"] == 0


def test_old_receipts_leave_the_spark_but_stay_in_the_total(cast, dashboard) -> None:
    MirrorEntryFactory(org=cast.acme, received_at=timezone.now() - timedelta(days=40))
    stats = counters(dashboard("viewer"))
    assert stats["receipts_total"]["value"] == 1
    assert sum(stats["receipts_total"]["spark"]) == 0


def test_analytics_authorization(cast, dashboard) -> None:
    assert APIClient().get("/v1/analytics").status_code == HTTPStatus.UNAUTHORIZED
    key_client = APIClient()
    key_client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    assert key_client.get("/v1/analytics").status_code == HTTPStatus.UNAUTHORIZED
