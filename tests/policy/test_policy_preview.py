"""POST /v1/policy/preview and GET /v1/policy/replays/{id}: a draft replayed over the org's
verified receipts against the active policy, deploying nothing; a large window runs in
the worker and the answer is polled."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from rest_framework.test import APIClient

from apps.policy.models import PolicyReplay, PolicyVersion
from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from tests.events.conftest import work
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, FLOOR_BYPASS
from tests.receipts.factories import Agent, as_text
from tests.receipts.model_factories import MirrorEntryFactory


def _mirror(push, agent: Agent, count: int, **overrides) -> list[dict]:
    receipts = [agent.receipt(**overrides) for _ in range(count)]
    for receipt in receipts:
        assert push(receipt).status_code == HTTPStatus.CREATED
    return receipts


def _preview(dashboard, toml: str, **body) -> dict:
    response = dashboard("manager").post(
        "/v1/policy/preview", {"toml": toml, **body}, format="json"
    )
    assert response.status_code == HTTPStatus.OK, response.content
    return response.json()


def _entry_pk(org, seq: int) -> int:
    return MirrorEntry.objects.get(org=org, seq=seq).pk


def test_preview_counts_per_rule_the_decisions_a_draft_flips_against_the_active_policy(
    cast, dashboard, push
) -> None:
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    agent = Agent()
    _mirror(push, agent, 3)  # tool calls: allowed by search.allow, blocked by search.block
    llm = agent.content()
    llm["action"]["verb"] = "llm_call"  # no rule in either: the default, both times
    assert push(agent.sign(llm)).status_code == HTTPStatus.CREATED

    body = _preview(dashboard, BLOCK_SEARCH)

    assert body["status"] == "ready"
    assert (body["considered"], body["changed"], body["unchanged"]) == (4, 3, 1)
    assert body["transitions"] == {"allow -> block": 3}
    (flip,) = body["flips"]
    assert flip["current"] == {"decision_path": "allow", "rule_id": "search.allow"}
    assert flip["proposed"] == {"decision_path": "block", "rule_id": "search.block"}
    assert (flip["transition"], flip["count"]) == ("allow -> block", 3)
    # Newest first, each linked to its page in the console.
    assert [example["seq"] for example in flip["examples"]] == [3, 2, 1]
    assert flip["examples"][0]["url"] == (
        f"/admin/receipts/mirrorentry/{_entry_pk(cast.acme, 3)}/change/"
    )
    assert flip["examples"][0]["tool_name"] == "search"
    assert [change["seq"] for change in body["sample"]] == [3, 2, 1]
    # The llm_call recorded "allow" (the agent's own policy); the active one routes it to a
    # human.
    assert body["recorded_differs"] == 1
    assert body["current_policy_hash"] == PolicyVersion.objects.get().policy_hash
    assert PolicyVersion.objects.count() == 1  # nothing deployed
    replay = PolicyReplay.objects.get()
    assert (replay.requested_by.username, replay.org) == ("acme-manager", cast.acme)


def test_against_the_fail_safe_pin_every_allow_flips_from_require_approval(
    cast, dashboard, push
) -> None:
    _mirror(push, Agent(), 2)
    body = _preview(dashboard, ALLOW_SEARCH)
    assert body["transitions"] == {"require_approval -> allow": 2}
    assert body["flips"][0]["current"]["rule_id"] == "policy.default.deny_unknown"


def test_a_draft_with_the_same_decisions_changes_nothing(cast, dashboard, push) -> None:
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    _mirror(push, Agent(), 2)
    body = _preview(dashboard, ALLOW_SEARCH.replace("search.allow", "search.ok"))
    assert (body["considered"], body["changed"], body["unchanged"]) == (2, 0, 2)
    assert body["rule_only_changed"] == 2  # same decision through a differently named rule
    assert body["flips"] == []


def test_preview_only_replays_the_requested_window(cast, dashboard) -> None:
    MirrorEntryFactory(org=cast.acme, received_at=timezone.now() - timedelta(days=10))
    MirrorEntryFactory(org=cast.acme)
    assert _preview(dashboard, BLOCK_SEARCH, days=7)["considered"] == 1
    assert _preview(dashboard, BLOCK_SEARCH, days=11)["considered"] == 2


def test_preview_never_reads_another_orgs_receipts(cast, dashboard, globex_push) -> None:
    _mirror(globex_push, Agent(), 2)
    assert _preview(dashboard, BLOCK_SEARCH)["considered"] == 0


def test_preview_validates_the_draft_like_a_deploy(cast, dashboard) -> None:
    client = dashboard("manager")
    assert client.post("/v1/policy/preview", {"toml": "[[rule"}, format="json").status_code == 422
    assert (
        client.post("/v1/policy/preview", {"toml": FLOOR_BYPASS}, format="json").status_code == 409
    )
    for days in (0, 91, "7"):
        bad_days = client.post("/v1/policy/preview", {"toml": "", "days": days}, format="json")
        assert bad_days.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert PolicyReplay.objects.count() == 0


def test_preview_needs_a_manager(cast, dashboard) -> None:
    response = dashboard("auditor").post("/v1/policy/preview", {"toml": ""}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    anonymous = APIClient().post("/v1/policy/preview", {"toml": ""}, format="json")
    assert anonymous.status_code == HTTPStatus.UNAUTHORIZED


def test_preview_skips_receipts_whose_body_is_retired_and_counts_them(
    cast, dashboard, push
) -> None:
    from apps.receipts.services import mirror_bodies_retire

    _mirror(push, Agent(), 3)
    mirror_bodies_retire(org=cast.acme, first_seq=1, last_seq=2)  # as retention does

    body = _preview(dashboard, BLOCK_SEARCH, days=90)

    assert (body["considered"], body["retired"], body["not_verified"]) == (1, 2, 0)


def test_receipts_that_no_longer_verify_are_left_out_and_counted(cast, dashboard, push) -> None:
    agent = Agent()
    first = _mirror(push, agent, 4)[0]
    # A stored text edited in place: the signature no longer holds.
    tampered = dict(first, content={**first["content"], "trust_level": "L1"})
    MirrorEntry.objects.filter(org=cast.acme, seq=1).update(receipt=as_text(tampered))
    # Another receipt's valid text stored under this entry: it verifies, but not as this one.
    MirrorEntry.objects.filter(org=cast.acme, seq=2).update(
        receipt=MirrorEntry.objects.get(org=cast.acme, seq=3).receipt
    )
    # Not JSON at all.
    MirrorEntry.objects.filter(org=cast.acme, seq=4).update(receipt="{")

    body = _preview(dashboard, BLOCK_SEARCH)

    assert (body["considered"], body["not_verified"]) == (1, 3)
    assert [example["seq"] for example in body["flips"][0]["examples"]] == [3]


@pytest.fixture
def inline_bound(settings):
    """Windows of more than two receipts run in the worker."""
    settings.POLICY_REPLAY_INLINE_RECEIPTS = 2
    return settings


@pytest.mark.django_db(transaction=True)  # the worker commits and closes its connection
def test_a_window_larger_than_the_bound_runs_in_the_worker_and_is_polled(
    cast, dashboard, push, inline_bound
) -> None:
    _mirror(push, Agent(), 3)
    client = dashboard("manager")

    queued = client.post("/v1/policy/preview", {"toml": BLOCK_SEARCH}, format="json")

    assert queued.status_code == HTTPStatus.ACCEPTED
    body = queued.json()
    assert (body["status"], body["estimated_receipts"]) == ("pending", 3)
    assert body["considered"] is None
    assert body["flips"] is None
    assert queued["Location"] == body["url"] == f"/v1/policy/replays/{body['replay_id']}"
    assert client.get(body["url"]).json()["status"] == "pending"
    assert DBTaskResult.objects.get().task_path == "apps.policy.tasks.run_policy_replay"

    work(lambda: DBTaskResult.objects.filter(finished_at__isnull=False).exists())

    polled = client.get(body["url"])
    assert polled.status_code == HTTPStatus.OK
    ready = polled.json()
    assert ready["status"] == "ready"
    assert (ready["considered"], ready["changed"]) == (3, 3)
    assert ready["transitions"] == {"require_approval -> block": 3}
    assert ready["finished_at"] is not None


def test_a_small_window_runs_in_the_request(cast, dashboard, push, inline_bound) -> None:
    _mirror(push, Agent(), 2)
    assert _preview(dashboard, BLOCK_SEARCH)["estimated_receipts"] == 2
    assert DBTaskResult.objects.count() == 0


def test_a_replay_is_read_by_a_manager_of_its_own_org_only(
    cast, dashboard, push, inline_bound
) -> None:
    _mirror(push, Agent(), 3)
    url = dashboard("manager").post("/v1/policy/preview", {"toml": ""}, format="json")["Location"]
    assert APIClient().get(url).status_code == HTTPStatus.UNAUTHORIZED
    assert dashboard("auditor").get(url).status_code == HTTPStatus.FORBIDDEN
    from apps.tenancy.services import membership_add

    membership_add(org=cast.globex, username="globex-manager", role="manager", password="pw")
    other = dashboard("manager", org_slug="globex").get(url)
    assert other.status_code == HTTPStatus.NOT_FOUND
    assert dashboard("manager").get("/v1/policy/replays/rpl_nope").status_code == 404
