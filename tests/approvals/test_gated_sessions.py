"""A ``@heso.gated`` session's decision and completion links answer the approval its
``suspended`` link opened (server.md §1, §6), on both profiles.

Pushed in order (docs/sdk.md, "@heso.gated sessions"), a session leaves no approval waiting for
votes. A decision link the mirror derives ``L1`` (signed by an approver key registered and
active for the org) settles it as that approver's vote; any other (``L0``: heso.gated's
public placeholder key, a key the org never registered) closes it as ``decided_locally``:
no human decision is recorded, the APIs report ``rejected`` (within each profile's
documented values) with the agent's own decision beside it, and no vote is taken.

Key-scoped: the suspended push opens the approval provisionally. Team-path: the client
opens it with ``POST /v1/approvals {receipt}`` and pushes the links to the outbox, one by
one or in a batch.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from nacl.signing import SigningKey
from rest_framework.test import APIClient

from apps.analytics.selectors import analytics_counters
from apps.approvals.models import Approval, ApprovalVote
from apps.approvals.services import approver_key_register
from apps.tenancy.models import Org
from tests.approvals.gated import PLACEHOLDER_SEED, gated_session
from tests.interop.corpus import flow_receipts, register_decision_key
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent, public_b64
from tests.teampath_fixtures import TeamPathCaller

PROFILES = ["keyscoped", "teampath", "teampath-batch"]


def pending_count(org: Org) -> int:
    """The dashboard's "Approvals pending" counter (analytics and the console queue)."""
    (counter,) = [c for c in analytics_counters(org=org) if c.key == "approvals_pending"]
    assert counter.value == Approval.objects.filter(org=org, status="pending").count()
    return int(counter.value)


class Client:
    """Pushes a gated session's chain in order as each profile's client does, and polls
    the approval as each profile's SDK would."""

    def __init__(self, cast: Any, settings: Any, profile: str) -> None:
        self.profile = profile
        self.org = cast.acme
        teampath = profile.startswith("teampath")
        settings.ROOT_URLCONF = f"config.urls.{'teampath' if teampath else 'keyscoped'}"
        settings.API_PROFILE = "teampath" if teampath else "keyscoped"
        self.pusher = Pusher(APIClient(), cast.acme_key.secret)
        self.caller = TeamPathCaller(cast.acme_key.secret)
        self.ref = ""

    def push_session(self, chain: list[dict[str, Any]]) -> None:
        suspended, *rest = chain
        if self.profile == "keyscoped":
            for receipt in chain:  # the suspended push opens the approval
                assert self.pusher(receipt).status_code == HTTPStatus.CREATED
            self.ref = suspended["content"]["action_hash"]
            return
        assert self.caller.push(suspended).status_code == HTTPStatus.CREATED
        opened = self.caller.post("/v1/approvals", {"receipt": suspended})
        assert opened.status_code == HTTPStatus.CREATED, opened.json()
        self.ref = opened.json()["approvalId"]
        if self.profile == "teampath-batch":
            results = self.caller.batch(rest).json()
            assert all(result["accepted"] for result in results), results
            return
        for receipt in rest:
            assert self.caller.push(receipt).status_code == HTTPStatus.CREATED

    def poll(self) -> dict[str, Any]:
        """``{"status", "decided_locally"}`` as the profile reports them."""
        if self.profile == "keyscoped":
            client = APIClient()
            client.credentials(HTTP_X_API_KEY=self.pusher.secret)
            body = client.get(f"/v1/approvals/{self.ref}").json()
            return {"status": body["status"], "decided_locally": body.get("decided_locally")}
        body = self.caller.get(f"/v1/approvals/{self.ref}").json()
        record = body.get("approval") or {}
        return {"status": body["outcome"], "decided_locally": record.get("decidedLocally")}

    def approval(self) -> Approval:
        return Approval.objects.get(org=self.org)


@pytest.fixture
def client(request: Any, cast: Any, settings: Any) -> Client:
    return Client(cast, settings, request.param)


@pytest.mark.django_db
@pytest.mark.parametrize("client", PROFILES, indirect=True)
def test_a_placeholder_signed_session_closes_its_approval_as_decided_locally(client) -> None:
    client.push_session(
        gated_session(Agent(), SigningKey(PLACEHOLDER_SEED), session_id="transfer-42")
    )

    approval = client.approval()
    assert (approval.status, approval.local_decision) == ("decided_locally", "approved")
    assert approval.resolved_at is not None
    assert not ApprovalVote.objects.exists()  # no human approval recorded
    assert pending_count(client.org) == 0
    assert client.poll() == {"status": "rejected", "decided_locally": "approved"}
    closed = approval.events.get(kind="decided_locally")
    assert closed.detail["trust_level"] == "L0"
    assert "not counted as a human decision" in closed.detail["note"]
    completed = approval.events.get(kind="lifecycle_link")
    assert completed.detail["link_kind"] == "completed"


@pytest.mark.django_db
@pytest.mark.parametrize("client", PROFILES, indirect=True)
def test_a_decision_link_signed_by_a_registered_approver_key_settles_it_as_that_approvers(
    client,
) -> None:
    decision_key = SigningKey.generate()
    approver_key_register(org=client.org, public_key=public_b64(decision_key), key_id="d")
    client.push_session(gated_session(Agent(), decision_key, session_id="transfer-43"))

    approval = client.approval()
    assert (approval.status, approval.approved_count, approval.local_decision) == (
        "approved", 1, "",
    )  # fmt: skip
    (vote,) = ApprovalVote.objects.all()
    assert vote.approver_public_key == public_b64(decision_key)
    assert pending_count(client.org) == 0
    assert client.poll() == {"status": "approved", "decided_locally": None}
    assert approval.events.filter(kind="vote", detail__decision_link__isnull=False).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("client", PROFILES, indirect=True)
def test_a_registered_approvers_denial_link_rejects_it(client) -> None:
    decision_key = SigningKey.generate()
    approver_key_register(org=client.org, public_key=public_b64(decision_key), key_id="d")
    client.push_session(
        gated_session(Agent(), decision_key, session_id="transfer-44", decision="denied")
    )

    assert client.approval().status == "rejected"
    assert pending_count(client.org) == 0
    assert client.poll() == {"status": "rejected", "decided_locally": None}


@pytest.mark.django_db
@pytest.mark.parametrize("client", PROFILES, indirect=True)
@pytest.mark.parametrize("registered", [True, False])
def test_the_sdks_own_gated_sessions_leave_no_approval_waiting_for_votes(
    client, registered
) -> None:
    """The corpus's sessions, exactly as heso 0.5.1 wrote them (their signed expiry is
    past by now: whichever answers first, nothing is left pending)."""
    if registered:
        register_decision_key(client.org)
    for flow in ("gated_approved", "gated_denied", "gated_placeholder_approved"):
        client.push_session([pushed.receipt for pushed in flow_receipts(flow)])
        assert pending_count(client.org) == 0, flow
    # The SDK decided locally: no approval anywhere says a human approved.
    assert not Approval.objects.filter(status="approved").exclude(votes__isnull=False).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("client", ["keyscoped", "teampath"], indirect=True)
def test_a_vote_after_the_agent_decided_locally_is_refused(client, approvers) -> None:
    chain = gated_session(Agent(), SigningKey(PLACEHOLDER_SEED), session_id="transfer-45")
    client.push_session(chain)
    content = chain[0]["content"]
    token = approvers[0].token(content, scope=content["policy"]["rule_id"])
    if client.profile == "keyscoped":
        sdk = APIClient()
        sdk.credentials(HTTP_X_API_KEY=client.pusher.secret)
        body = {"token_b64": token, "action_content": content}
        answer = sdk.post(f"/v1/approvals/{client.ref}/submit-token", body, format="json")
    else:
        answer = client.caller.post(f"/v1/approvals/{client.ref}/token", {"token": token})
    assert answer.status_code == HTTPStatus.CONFLICT
    assert client.approval().status == "decided_locally"


@pytest.mark.django_db
def test_another_sessions_link_with_the_same_action_leaves_the_approval_alone(cast, push) -> None:
    """A link answers only the suspension its own chain leads back to."""
    operator = Agent()
    placeholder = SigningKey(PLACEHOLDER_SEED)
    first = gated_session(operator, placeholder, session_id="s-a")
    assert push(first[0]).status_code == HTTPStatus.CREATED
    other = gated_session(operator, placeholder, session_id="s-b")
    assert push(other[0]).status_code == HTTPStatus.CREATED
    assert push(other[1]).status_code == HTTPStatus.CREATED
    statuses = dict(Approval.objects.values_list("session_id", "status"))
    assert statuses == {"s-a": "pending", "s-b": "decided_locally"}


@pytest.mark.django_db
@pytest.mark.parametrize("client", ["teampath"], indirect=True)
@pytest.mark.parametrize("signed_by", ["placeholder", "registered"])
def test_links_pushed_before_the_open_answer_the_approval_when_it_opens(client, signed_by) -> None:
    """A team-path client may flush its outbox (the whole session) before it opens the
    approval: the links already mirrored answer it at once."""
    decision_key = SigningKey(PLACEHOLDER_SEED)
    if signed_by == "registered":
        decision_key = SigningKey.generate()
        approver_key_register(org=client.org, public_key=public_b64(decision_key), key_id="d")
    chain = gated_session(Agent(), decision_key, session_id="transfer-46")
    assert all(result["accepted"] for result in client.caller.batch(chain).json())

    opened = client.caller.post("/v1/approvals", {"receipt": chain[0]})

    assert opened.status_code == HTTPStatus.CREATED
    client.ref = opened.json()["approvalId"]
    assert pending_count(client.org) == 0
    expected = (
        {"status": "rejected", "decided_locally": "approved"}
        if signed_by == "placeholder"
        else {"status": "approved", "decided_locally": None}
    )
    assert client.poll() == expected
