"""The log's routes on the team-path profile: the same answers in its error body."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from rest_framework.test import APIClient

from apps.transparency.services import transparency_publish_epoch
from apps.transparency.tree.proof import verify_proof
from tests.receipts.factories import Agent
from tests.teampath_fixtures import TEAMPATH, TeamPathCaller

pytestmark = TEAMPATH


def test_the_proof_route_answers_in_the_team_path_body(cast: Any) -> None:
    caller = TeamPathCaller(cast.acme_key.secret)
    receipt = Agent().receipt()
    assert caller.push(receipt).status_code == HTTPStatus.CREATED
    receipt_id = caller.push(receipt).json()["receiptId"]
    pending = caller.get(f"/v1/receipts/{receipt_id}/proof")
    assert pending.status_code == HTTPStatus.CONFLICT
    assert pending.json()["error"] == "proof_pending"
    assert int(pending["Retry-After"]) >= 1
    transparency_publish_epoch()
    answer = caller.get(f"/v1/receipts/{receipt_id}/proof")
    assert answer.status_code == HTTPStatus.OK
    assert verify_proof(
        action_hash=receipt_id,
        proof=answer.json(),
        origin="localhost/v1/log",
        witness_keys=[],
        required_cosignatures=0,
    ).valid
    other = TeamPathCaller(cast.globex_key.secret).get(f"/v1/receipts/{receipt_id}/proof")
    assert other.status_code == HTTPStatus.NOT_FOUND
    assert other.json()["error"] == "receipt_not_found"
    assert TeamPathCaller(None).get(f"/v1/receipts/{receipt_id}/proof").json()["error"] == (
        "unauthorized"
    )
    only_policy = TeamPathCaller(cast.acme_policy_only_key.secret)
    assert only_policy.get(f"/v1/receipts/{receipt_id}/proof").json()["error"] == "forbidden"


def test_public_routes_answer_in_the_team_path_body(cast: Any) -> None:
    client = APIClient()
    missing = client.get("/v1/log/checkpoint")
    assert missing.status_code == HTTPStatus.NOT_FOUND
    assert missing.json()["error"] == "checkpoint_not_found"
    bad = client.get("/v1/log/consistency?first=a&second=1")
    assert bad.status_code == HTTPStatus.BAD_REQUEST
    assert bad.json()["error"] == "validation_failed"
    assert client.get("/v1/log/tile/0/000").json()["error"] == "tile_not_found"
    # A line break in the rest of the path is still this route's own 404 (as documented).
    broken = client.get("/v1/log/tile/0/%0A")
    assert broken.status_code == HTTPStatus.NOT_FOUND
    assert broken.json()["error"] == "tile_not_found"
    head = client.get("/v1/log/orgs/olog_aaaaaaaaaaaaaaaaaaaaaaaaaa/consistency?first=1&second=2")
    assert head.json()["error"] == "org_head_not_found"
    cosign = client.post(
        "/v1/log/cosignatures", {"checkpoint_size": 1, "cosignature": "nope"}, format="json"
    )
    assert cosign.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert cosign.json()["error"] == "cosignature_invalid"
    shape = client.post("/v1/log/cosignatures", {"checkpoint_size": "1"}, format="json")
    assert shape.status_code == HTTPStatus.BAD_REQUEST
    assert shape.json()["error"] == "validation_failed"
