"""The standard-library client against a live team-path server (real HTTP)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest

from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from clients.teampath import TeamPathClient, TeamPathError
from tests.receipts.factories import Agent, as_text

pytestmark = [pytest.mark.urls("config.urls.teampath"), pytest.mark.django_db(transaction=True)]

ALLOW_SEARCH = (
    '[[rule]]\nid = "search.allow"\norder = 10\nenabled = true\nsubject = { kind = "any" }\n'
    'verb = "tool_call"\nscope = "*"\ndecision = "allow"\n'
)


@pytest.fixture
def client(live_server: Any, cast: Any) -> TeamPathClient:
    return TeamPathClient(live_server.url, cast.acme_key.secret, "acme", timeout=10)


def test_fetch_policy_returns_the_bundle(client, cast):
    version = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    bundle = client.fetch_policy()
    assert bundle["version"] == version.policy_id
    assert [rule["id"] for rule in bundle["rules"]] == ["search.allow"]
    assert bundle["fetchedAt"].endswith("Z")


def test_fetch_policy_without_a_policy_raises_policy_not_found(client):
    with pytest.raises(TeamPathError) as raised:
        client.fetch_policy()
    error = raised.value
    assert (error.status, error.code) == (HTTPStatus.NOT_FOUND, "policy_not_found")
    assert "HTTP 404 Not Found" in str(error)
    assert "policy_not_found" in str(error)


def test_another_team_id_raises_team_not_found(live_server, cast):
    client = TeamPathClient(live_server.url, cast.acme_key.secret, "globex")
    with pytest.raises(TeamPathError) as raised:
        client.fetch_policy()
    assert raised.value.code == "team_not_found"


def test_a_bad_key_raises_unauthorized(live_server, cast):
    client = TeamPathClient(live_server.url, "mk_nothing_here", "acme")
    with pytest.raises(TeamPathError) as raised:
        client.fetch_policy()
    assert (raised.value.status, raised.value.code) == (HTTPStatus.UNAUTHORIZED, "unauthorized")


def test_push_receipt_as_object_and_as_text(client, cast):
    agent = Agent()
    first, second = agent.receipt(), agent.receipt()
    assert client.push_receipt(first) == {
        "receiptId": first["content"]["action_hash"],
        "accepted": True,
        "trustLevel": "L0",
    }
    assert client.push_receipt(as_text(second))["accepted"] is True
    assert client.push_receipt(first)["accepted"] is True  # a duplicate: 200
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 2


def test_a_rejected_receipt_raises_with_the_result_in_the_body(client):
    receipt = Agent().receipt()
    receipt["content"]["action"]["fields"]["query"] = "tampered"
    with pytest.raises(TeamPathError) as raised:
        client.push_receipt(receipt)
    error = raised.value
    assert (error.status, error.code) == (HTTPStatus.UNPROCESSABLE_ENTITY, "receipt_rejected")
    assert error.body["accepted"] is False
    assert error.body["rejectionReason"] == "HashMismatch"
    assert "HTTP 422 Unprocessable" in str(error)


def test_push_batch_returns_results_in_order(client, cast):
    agent = Agent()
    good = [agent.receipt() for _ in range(3)]
    bad = agent.receipt(trust_level="L1")
    results = client.push_batch([good[0], bad, as_text(good[1]), good[2]])
    assert [result["accepted"] for result in results] == [True, False, True, True]
    assert results[1]["rejectionReason"].startswith("TrustLevelMismatch")
    seqs = dict(MirrorEntry.objects.filter(org=cast.acme).values_list("action_hash", "seq"))
    assert [seqs[r["content"]["action_hash"]] for r in good] == [1, 2, 3]


def test_an_empty_batch_raises_validation_failed(client):
    with pytest.raises(TeamPathError) as raised:
        client.push_batch([])
    assert (raised.value.status, raised.value.code) == (HTTPStatus.BAD_REQUEST, "validation_failed")


def test_quota_exceeded_carries_retry_after(client, cast):
    from apps.tenancy.services import org_set_limits

    org_set_limits(org=cast.acme, monthly_receipt_cap=0)
    with pytest.raises(TeamPathError) as raised:
        client.push_receipt(Agent().receipt())
    assert raised.value.code == "quota_exceeded"
    assert raised.value.retry_after is not None
    assert raised.value.retry_after >= 1


class _ScriptedClient(TeamPathClient):
    """Answers poll_approval from a script instead of the network."""

    def __init__(self, answers: list[Any]) -> None:
        self.slept: list[float] = []
        self.now = 0.0

        def sleep(seconds: float) -> None:
            self.slept.append(seconds)
            self.now += seconds

        super().__init__("http://unused", "key", "acme", sleep=sleep, clock=lambda: self.now)
        self.answers = answers

    def poll_approval(self, approval_id: str) -> dict[str, Any]:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


def test_wait_for_approval_polls_until_settled():
    settled = {"outcome": "approved", "approval": {"id": "x"}}
    client = _ScriptedClient([{"outcome": "pending"}, {"outcome": "pending"}, settled])
    assert client.wait_for_approval("x", interval=1.5, timeout=60) == settled
    assert client.slept == [1.5, 1.5]


def test_wait_for_approval_waits_out_429_and_503():
    busy = TeamPathError(503, "over_capacity", "busy", retry_after=4)
    client = _ScriptedClient([busy, {"outcome": "rejected"}])
    assert client.wait_for_approval("x", interval=1, timeout=60) == {"outcome": "rejected"}
    assert client.slept == [4]


def test_wait_for_approval_times_out():
    client = _ScriptedClient([{"outcome": "pending"}] * 10)
    with pytest.raises(TimeoutError):
        client.wait_for_approval("x", interval=2, timeout=5)
    assert sum(client.slept) == 5


def test_wait_for_approval_raises_other_errors():
    client = _ScriptedClient([TeamPathError(404, "approval_not_found", "no such approval")])
    with pytest.raises(TeamPathError):
        client.wait_for_approval("x", interval=1, timeout=5)


def test_the_approval_round_trip_over_http(client, cast):
    from apps.approvals.services import approver_key_register
    from tests.approvals.conftest import Approver, suspended_receipt

    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    receipt = suspended_receipt(Agent())
    opened = client.open_approval(receipt, routing_hint="oncall")
    assert set(opened) == {"approvalId", "token", "expiresAt"}
    assert client.poll_approval(opened["approvalId"]) == {"outcome": "pending"}
    token = alice.token(receipt["content"], scope="payments.review")
    record = client.submit_token(opened["approvalId"], token)
    assert (record["outcome"], record["routingHint"]) == ("approved", "oncall")
    settled = client.wait_for_approval(opened["approvalId"], interval=0.01, timeout=5)
    assert settled == {"outcome": "approved", "approval": record}
    with pytest.raises(TeamPathError) as raised:
        client.poll_approval("apr_unknown")
    assert raised.value.code == "approval_not_found"
