"""POST /v1/policy/preview: replay recent receipts through a draft, deploy nothing."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

from django.utils import timezone

from apps.policy.models import PolicyVersion
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, FLOOR_BYPASS
from tests.receipts.factories import Agent
from tests.receipts.model_factories import MirrorEntryFactory


def _mirror(push, agent: Agent, count: int, **overrides) -> None:
    for _ in range(count):
        assert push(agent.receipt(**overrides)).status_code == HTTPStatus.CREATED


def test_preview_counts_the_decisions_a_draft_would_change(cast, dashboard, push) -> None:
    agent = Agent()
    _mirror(push, agent, 3)  # tool_call, allowed under "tool_call.allow"
    llm = agent.content()
    llm["action"]["verb"] = "llm_call"
    assert push(agent.sign(llm)).status_code == HTTPStatus.CREATED

    response = dashboard("manager").post(
        "/v1/policy/preview", {"toml": BLOCK_SEARCH}, format="json"
    )

    assert response.status_code == HTTPStatus.OK
    body = response.json()
    # 3 tool calls allow -> block; the llm_call falls to the default: allow -> require_approval.
    assert body["considered"] == 4
    assert body["changed"] == 4
    assert body["transitions"] == {"allow -> block": 3, "allow -> require_approval": 1}
    assert len(body["sample"]) == 4
    first = body["sample"][0]
    assert first["seq"] == 4  # newest first
    assert first["after"] == {
        "decision_path": "require_approval",
        "rule_id": "policy.default.deny_unknown",
    }
    assert PolicyVersion.objects.count() == 0


def test_a_draft_with_the_same_decisions_changes_nothing(cast, dashboard, push) -> None:
    _mirror(push, Agent(), 2)
    body = (
        dashboard("manager")
        .post("/v1/policy/preview", {"toml": ALLOW_SEARCH}, format="json")
        .json()
    )
    assert (body["considered"], body["changed"], body["unchanged"]) == (2, 0, 2)
    # Same decision through a differently named rule.
    assert body["rule_only_changed"] == 2


def test_preview_only_replays_the_requested_window(cast, dashboard) -> None:
    MirrorEntryFactory(org=cast.acme, received_at=timezone.now() - timedelta(days=10))
    MirrorEntryFactory(org=cast.acme)
    body = (
        dashboard("manager")
        .post("/v1/policy/preview", {"toml": BLOCK_SEARCH, "days": 7}, format="json")
        .json()
    )
    assert body["considered"] == 1


def test_preview_never_reads_another_orgs_receipts(cast, dashboard, globex_push) -> None:
    _mirror(globex_push, Agent(), 2)
    body = (
        dashboard("manager")
        .post("/v1/policy/preview", {"toml": BLOCK_SEARCH}, format="json")
        .json()
    )
    assert body["considered"] == 0


def test_preview_validates_the_draft_like_a_deploy(cast, dashboard) -> None:
    client = dashboard("manager")
    assert client.post("/v1/policy/preview", {"toml": "[[rule"}, format="json").status_code == 422
    assert (
        client.post("/v1/policy/preview", {"toml": FLOOR_BYPASS}, format="json").status_code == 409
    )
    bad_days = client.post("/v1/policy/preview", {"toml": "", "days": 0}, format="json")
    assert bad_days.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_preview_needs_a_manager(cast, dashboard) -> None:
    response = dashboard("auditor").post("/v1/policy/preview", {"toml": ""}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN


def test_preview_skips_receipts_whose_body_is_retired(cast, dashboard, push) -> None:
    from apps.receipts.services import mirror_bodies_retire

    _mirror(push, Agent(), 3)
    mirror_bodies_retire(org=cast.acme, first_seq=1, last_seq=2)  # as retention does

    response = dashboard("manager").post(
        "/v1/policy/preview", {"toml": BLOCK_SEARCH, "days": 90}, format="json"
    )

    assert response.status_code == HTTPStatus.OK
    assert response.json()["considered"] == 1
