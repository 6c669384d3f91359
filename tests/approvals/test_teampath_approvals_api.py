"""Team-path approvals: open with the receipt, poll by approval id, settle with a token."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from blake3 import blake3
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.approvals.models import Approval, ApprovalStatus, ApprovalVote
from apps.approvals.selectors import eligible_approvers
from apps.approvals.services import approver_key_register
from apps.receipts.models import MirrorEntry
from tests.approvals.conftest import Approver, suspended_receipt
from tests.receipts.factories import as_text
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH

VOTE_TABLE = f'"{ApprovalVote._meta.db_table}"'

SCOPE = "payments.review"


@pytest.fixture
def approvers(cast) -> list[Approver]:
    team = [Approver(name) for name in ("alice", "bob")]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    return team


def open_body(receipt, hint=None) -> str:
    text = '{"receipt":' + (receipt if isinstance(receipt, str) else as_text(receipt))
    if hint is not None:
        text += ',"routingHint":' + json.dumps(hint)
    return text + "}"


def open_approval(caller, receipt, hint=None):
    return caller.post("/v1/approvals", open_body(receipt, hint))


def submit(caller, approval_id, token):
    return caller.post(f"/v1/approvals/{approval_id}/token", json.dumps({"token": token}))


@pytest.fixture
def opened(acme, agent, approvers):
    receipt = suspended_receipt(agent)
    response = open_approval(acme, receipt, hint="oncall-payments")
    assert response.status_code == HTTPStatus.CREATED
    return receipt, response.json()


class TestOpen:
    def test_it_opens_an_approval_with_a_one_time_token_and_expiry(self, opened, cast):
        receipt, result = opened
        assert set(result) == {"approvalId", "token", "expiresAt"}
        approval = Approval.objects.get(org=cast.acme, approval_id=result["approvalId"])
        assert approval.action_hash == receipt["content"]["action_hash"]
        assert approval.status == ApprovalStatus.PENDING
        assert approval.routing_hint == "oncall-payments"
        assert approval.rule_id == SCOPE
        assert approval.access_token_digest == blake3(result["token"].encode()).hexdigest()
        assert json.loads(approval.suspended_content) == receipt["content"]

    def test_without_a_signed_expiry_it_expires_after_the_default_ttl(self, opened):
        expires_at = datetime.fromisoformat(opened[1]["expiresAt"].replace("Z", "+00:00"))
        assert opened[1]["expiresAt"].endswith("Z")
        remaining = expires_at - datetime.now(UTC)
        assert timedelta(minutes=59) < remaining <= timedelta(hours=1)

    def test_a_signed_expiry_and_approver_list_are_kept(self, acme, agent, approvers, cast):
        receipt = suspended_receipt(agent)
        content = {k: v for k, v in receipt["content"].items() if k != "action_hash"}
        content["suspension"] = {
            "resume_token_hash": "a" * 64,
            "context_ref": {"scheme": "none", "key": "k", "hash": "h"},
            "policy": {"policy_id": "pol_x", "policy_hash": "b" * 64, "rule": SCOPE},
            "approval": {
                "sla": "PT30M",
                "expires_at": "2099-01-01T00:00:00Z",
                "on_timeout": "deny",
                "approver_pubkeys": [approvers[1].public],
            },
        }
        response = open_approval(acme, agent.sign(content))
        assert response.status_code == HTTPStatus.CREATED, response.content
        assert response.json()["expiresAt"] == "2099-01-01T00:00:00Z"
        approval = Approval.objects.get(approval_id=response.json()["approvalId"])
        assert eligible_approvers(approval) == [approvers[1].public]

    def test_opening_the_same_receipt_again_is_200_with_the_same_id_and_no_token(
        self, acme, opened
    ):
        receipt, first = opened
        again = open_approval(acme, receipt)
        assert again.status_code == HTTPStatus.OK
        assert again.json() == {"approvalId": first["approvalId"], "expiresAt": first["expiresAt"]}

    def test_the_receipt_is_not_mirrored_by_opening(self, opened):
        assert not MirrorEntry.objects.exists()

    def test_a_receipt_that_does_not_wait_for_a_human_is_422(self, acme, agent, approvers):
        response = open_approval(acme, agent.receipt())
        assert_error(response, HTTPStatus.UNPROCESSABLE_ENTITY, "receipt_not_suspended")
        assert not Approval.objects.exists()

    def test_a_receipt_failing_verification_is_422_receipt_rejected(self, acme, agent, approvers):
        receipt = suspended_receipt(agent)
        receipt["content"]["action"]["fields"]["query"] = "tampered"
        assert_error(
            open_approval(acme, receipt), HTTPStatus.UNPROCESSABLE_ENTITY, "receipt_rejected"
        )

    def test_a_malformed_receipt_is_400(self, acme, agent, approvers):
        receipt = suspended_receipt(agent)
        receipt["extra"] = 1
        assert_error(open_approval(acme, receipt), HTTPStatus.BAD_REQUEST, "validation_failed")

    def test_without_approver_keys_it_opens_pending_and_the_first_vote_is_409(self, acme, agent):
        response = open_approval(acme, suspended_receipt(agent))
        assert response.status_code == HTTPStatus.CREATED, response.content
        approval_id = response.json()["approvalId"]
        assert acme.get(f"/v1/approvals/{approval_id}").json() == {"outcome": "pending"}

    @pytest.mark.parametrize(
        "body",
        [
            "[]",
            "{}",
            '{"routingHint": "x"}',
            '{"receipt": {}, "receipt": {}}',
            '{"receipt": {}, "other": 1}',
            '{"receipt": 1}',
        ],
    )
    def test_bodies_of_the_wrong_shape_are_400(self, acme, approvers, body):
        assert_error(acme.post("/v1/approvals", body), HTTPStatus.BAD_REQUEST, "validation_failed")

    @pytest.mark.parametrize("hint", [1, None, "x" * 201])
    def test_a_bad_routing_hint_is_400(self, acme, agent, approvers, hint):
        text = '{"receipt":' + as_text(suspended_receipt(agent)) + ',"routingHint":'
        response = acme.post("/v1/approvals", text + json.dumps(hint) + "}")
        assert_error(response, HTTPStatus.BAD_REQUEST, "validation_failed")

    def test_bad_json_is_400_invalid_json(self, acme):
        assert_error(acme.post("/v1/approvals", "{"), HTTPStatus.BAD_REQUEST, "invalid_json")


class TestPollAndSettle:
    def test_a_pending_approval_polls_pending_without_a_record(self, acme, opened):
        response = acme.get(f"/v1/approvals/{opened[1]['approvalId']}")
        assert response.status_code == HTTPStatus.OK
        assert response.json() == {"outcome": "pending"}

    def test_an_approver_token_settles_it_approved(self, acme, opened, approvers):
        receipt, result = opened
        alice = approvers[0]
        token = alice.token(receipt["content"], scope=SCOPE)
        response = submit(acme, result["approvalId"], token)
        assert response.status_code == HTTPStatus.OK
        record = response.json()
        assert record["approvalId"] == result["approvalId"]
        assert record["receiptId"] == receipt["content"]["action_hash"]
        assert record["outcome"] == "approved"
        assert record["routingHint"] == "oncall-payments"
        assert record["decidedAt"].endswith("Z")
        assert record["votes"] == [
            {
                "approverPublicKey": alice.public,
                "decision": "approved",
                "votedAt": record["decidedAt"],
            }
        ]
        poll = acme.get(f"/v1/approvals/{result['approvalId']}").json()
        assert poll == {"outcome": "approved", "approval": record}

    def test_a_rejecting_token_settles_it_rejected(self, acme, opened, approvers):
        receipt, result = opened
        token = approvers[1].token(receipt["content"], scope=SCOPE, decision="rejected")
        assert submit(acme, result["approvalId"], token).json()["outcome"] == "rejected"
        assert acme.get(f"/v1/approvals/{result['approvalId']}").json()["outcome"] == "rejected"

    def test_a_token_on_a_settled_approval_is_409(self, acme, opened, approvers):
        receipt, result = opened
        submit(acme, result["approvalId"], approvers[0].token(receipt["content"], scope=SCOPE))
        late = submit(
            acme, result["approvalId"], approvers[1].token(receipt["content"], scope=SCOPE)
        )
        assert_error(late, HTTPStatus.CONFLICT, "approval_settled")

    def test_a_token_for_another_scope_is_403_token_rejected(self, acme, opened, approvers):
        receipt, result = opened
        token = approvers[0].token(receipt["content"], scope="other.rule")
        assert_error(
            submit(acme, result["approvalId"], token), HTTPStatus.FORBIDDEN, "token_rejected"
        )
        assert not ApprovalVote.objects.exists()

    def test_a_token_from_an_unregistered_key_is_403(self, acme, opened):
        receipt, result = opened
        token = Approver("mallory").token(receipt["content"], scope=SCOPE)
        assert_error(
            submit(acme, result["approvalId"], token), HTTPStatus.FORBIDDEN, "token_rejected"
        )

    def test_a_token_for_other_content_is_403(self, acme, agent, opened, approvers):
        _, result = opened
        token = approvers[0].token(suspended_receipt(agent)["content"], scope=SCOPE)
        assert_error(
            submit(acme, result["approvalId"], token), HTTPStatus.FORBIDDEN, "token_rejected"
        )

    def test_a_replayed_token_is_refused(self, acme, agent, approvers):
        first, second = suspended_receipt(agent), suspended_receipt(agent)
        id_1 = open_approval(acme, first).json()["approvalId"]
        id_2 = open_approval(acme, second).json()["approvalId"]
        nonce = b"n" * 32
        submit(acme, id_1, approvers[0].token(first["content"], scope=SCOPE, nonce=nonce))
        replay = approvers[0].token(second["content"], scope=SCOPE, nonce=nonce)
        assert_error(submit(acme, id_2, replay), HTTPStatus.FORBIDDEN, "token_rejected")

    @pytest.mark.parametrize(
        "body",
        ["{}", '{"token": 1}', '{"token": ""}', '{"token": "%%%"}', '{"token": "QQ==", "x": 1}'],
    )
    def test_bad_token_bodies_are_400(self, acme, opened, body):
        response = acme.post(f"/v1/approvals/{opened[1]['approvalId']}/token", body)
        assert_error(response, HTTPStatus.BAD_REQUEST, "validation_failed")

    def test_a_short_token_is_403_malformed(self, acme, opened):
        response = submit(acme, opened[1]["approvalId"], "QUJD")
        body = assert_error(response, HTTPStatus.FORBIDDEN, "token_rejected")
        assert "malformed" in body["message"]

    def test_an_expired_approval_polls_expired_and_refuses_tokens(
        self, acme, opened, approvers, cast
    ):
        receipt, result = opened
        Approval.objects.filter(approval_id=result["approvalId"]).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1)
        )
        poll = acme.get(f"/v1/approvals/{result['approvalId']}").json()
        assert poll["outcome"] == "expired"
        assert poll["approval"]["outcome"] == "expired"
        token = approvers[0].token(receipt["content"], scope=SCOPE)
        assert_error(submit(acme, result["approvalId"], token), HTTPStatus.GONE, "approval_expired")

    def test_a_token_after_expiry_is_410_even_unpolled(self, acme, opened, approvers):
        receipt, result = opened
        Approval.objects.filter(approval_id=result["approvalId"]).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1)
        )
        token = approvers[0].token(receipt["content"], scope=SCOPE)
        assert_error(submit(acme, result["approvalId"], token), HTTPStatus.GONE, "approval_expired")

    def test_an_approval_settled_before_its_expiry_stays_409_after_it(
        self, acme, opened, approvers
    ):
        receipt, result = opened
        first = submit(
            acme, result["approvalId"], approvers[0].token(receipt["content"], scope=SCOPE)
        )
        assert first.status_code == HTTPStatus.OK
        Approval.objects.filter(approval_id=result["approvalId"]).update(
            expires_at=datetime.now(UTC) + timedelta(seconds=1)
        )
        Approval.objects.filter(approval_id=result["approvalId"]).update(
            expires_at=datetime.now(UTC) - timedelta(microseconds=1)
        )
        late = submit(
            acme, result["approvalId"], approvers[1].token(receipt["content"], scope=SCOPE)
        )
        assert_error(late, HTTPStatus.CONFLICT, "approval_settled")

    @pytest.mark.parametrize("route", ["poll", "token"])
    def test_a_settled_record_reads_its_votes_once(self, acme, opened, approvers, route):
        """The record's outcome, deciding approver and vote list come from one read of the
        counted votes, not a query per member (there were five)."""
        receipt, result = opened
        token = approvers[0].token(receipt["content"], scope=SCOPE)
        with CaptureQueriesContext(connection) as queries:
            if route == "token":
                response = submit(acme, result["approvalId"], token)
            else:
                submit(acme, result["approvalId"], token)
                queries.initial_queries = len(connection.queries_log)
                response = acme.get(f"/v1/approvals/{result['approvalId']}")
        assert response.json()["approval" if route == "poll" else "outcome"]
        vote_reads = [
            query["sql"]
            for query in queries.captured_queries
            if query["sql"].startswith("SELECT") and VOTE_TABLE in query["sql"].split(" WHERE ")[0]
        ]
        # The token route also reads votes to judge the vote (the nonce, the key's earlier
        # vote); the record itself adds one read.
        expected = 1 if route == "poll" else 3
        assert len(vote_reads) == expected, vote_reads


class TestAuthorization:
    @pytest.mark.parametrize("whose", ["unknown-id", "another-teams"])
    @pytest.mark.parametrize("route", ["poll", "token"])
    def test_an_unknown_or_another_teams_approval_is_404(self, acme, globex, opened, route, whose):
        if whose == "unknown-id":
            caller, target = acme, "apr_nothing"
        else:
            caller, target = globex, opened[1]["approvalId"]
        if route == "poll":
            response = caller.get(f"/v1/approvals/{target}")
        else:
            response = submit(caller, target, "QUJD")
        assert_error(response, HTTPStatus.NOT_FOUND, "approval_not_found")

    def test_another_team_opening_the_same_receipt_gets_its_own_approval(
        self, globex, opened, cast
    ):
        approver_key_register(org=cast.globex, public_key=Approver("gina").public, key_id="gina")
        response = open_approval(globex, opened[0])
        assert response.status_code == HTTPStatus.CREATED
        assert response.json()["approvalId"] != opened[1]["approvalId"]

    @pytest.mark.parametrize("route", ["open", "poll", "token"])
    def test_the_matrix(self, cast, anonymous, opened, route):
        from apps.tenancy.models import Scope
        from apps.tenancy.services import api_key_issue, api_key_revoke
        from tests.teampath_fixtures import TeamPathCaller

        receipt, result = opened
        approval_id = result["approvalId"]

        def call(caller, **headers):
            if route == "open":
                return caller.post("/v1/approvals", open_body(receipt), **headers)
            if route == "poll":
                return caller.get(f"/v1/approvals/{approval_id}", **headers)
            return caller.post(f"/v1/approvals/{approval_id}/token", '{"token": "QUJD"}', **headers)

        assert_error(call(anonymous), HTTPStatus.UNAUTHORIZED, "unauthorized")
        x_api_key = call(anonymous, HTTP_X_API_KEY=cast.acme_key.secret)
        assert_error(x_api_key, HTTPStatus.UNAUTHORIZED, "unauthorized")
        no_scope = TeamPathCaller(
            api_key_issue(org=cast.acme, scopes=[Scope.RECEIPTS_WRITE, Scope.POLICY_READ]).secret
        )
        assert_error(call(no_scope), HTTPStatus.FORBIDDEN, "forbidden")
        scoped = api_key_issue(org=cast.acme, scopes=[Scope.APPROVALS_WRITE])
        allowed = call(TeamPathCaller(scoped.secret))
        if route == "token":  # past authorization: "QUJD" is no token
            assert_error(allowed, HTTPStatus.FORBIDDEN, "token_rejected")
        else:  # opened again, or polled
            assert allowed.status_code == HTTPStatus.OK
        api_key_revoke(prefix=scoped.api_key.prefix)
        assert_error(call(TeamPathCaller(scoped.secret)), HTTPStatus.UNAUTHORIZED, "unauthorized")
