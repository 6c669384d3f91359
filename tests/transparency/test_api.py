"""The log's routes on the key-scoped profile (transparency.md §5, §6)."""

from __future__ import annotations

import time
from http import HTTPStatus
from typing import Any

import pytest
from nacl.signing import SigningKey
from rest_framework.test import APIClient

from apps.transparency.models import Cosignature
from apps.transparency.services import transparency_publish_epoch, witness_register
from apps.transparency.tree import merkle, note
from apps.transparency.tree.proof import verify_proof
from tests.receipts.factories import Agent

pytestmark = pytest.mark.django_db

ORIGIN = "localhost/v1/log"
W1_SEED = bytes(range(32))
W1 = "witness.example.com/w1"


def w1_vkey() -> str:
    return note.vkey_of(W1, bytes(SigningKey(W1_SEED).verify_key))


@pytest.fixture
def mirrored(cast: Any, push: Any, globex_push: Any) -> list[str]:
    """Three acme receipts and one globex receipt, mirrored through the API."""
    agent = Agent()
    hashes = []
    for _ in range(3):
        receipt = agent.receipt()
        assert push(receipt).status_code == HTTPStatus.CREATED
        hashes.append(receipt["content"]["action_hash"])
    assert globex_push(agent.receipt()).status_code == HTTPStatus.CREATED
    return hashes


def proof_of(client: APIClient, action_hash: str, **headers: str) -> Any:
    return client.get(f"/v1/receipts/{action_hash}/proof", **headers)


def test_a_receipt_in_no_checkpoint_is_pending_with_retry_after(cast, mirrored) -> None:
    answer = proof_of(APIClient(), mirrored[0], HTTP_X_API_KEY=cast.acme_key.secret)
    assert answer.status_code == HTTPStatus.CONFLICT
    assert "detail" in answer.json()
    assert int(answer["Retry-After"]) >= 1


def test_the_proof_object_verifies_offline_after_an_epoch(cast, mirrored) -> None:
    transparency_publish_epoch()
    for index, action_hash in enumerate(mirrored):
        answer = proof_of(APIClient(), action_hash, HTTP_X_API_KEY=cast.acme_key.secret)
        assert answer.status_code == HTTPStatus.OK
        proof = answer.json()
        assert proof["leaf_index"] == index
        assert proof["org_tree_size"] == 3
        assert proof["epoch"] == 1
        assert proof["log_id"] == ORIGIN
        assert "cosignatures" not in proof  # none yet: left out, never []
        verdict = verify_proof(
            action_hash=action_hash,
            proof=proof,
            origin=ORIGIN,
            witness_keys=[],
            required_cosignatures=0,
        )
        assert verdict.valid, verdict
        assert not verify_proof(
            action_hash=mirrored[(index + 1) % 3],
            proof=proof,
            origin=ORIGIN,
            witness_keys=[],
            required_cosignatures=0,
        ).valid


def test_the_proof_route_answers_the_authorization_matrix(cast, mirrored, dashboard) -> None:
    transparency_publish_epoch()
    action_hash = mirrored[0]
    assert proof_of(APIClient(), action_hash).status_code == HTTPStatus.UNAUTHORIZED
    bad = proof_of(APIClient(), action_hash, HTTP_X_API_KEY="hk_nope_nope")
    assert bad.status_code == HTTPStatus.UNAUTHORIZED
    policy_only = proof_of(
        APIClient(), action_hash, HTTP_X_API_KEY=cast.acme_policy_only_key.secret
    )
    assert policy_only.status_code == HTTPStatus.FORBIDDEN
    other_org = proof_of(APIClient(), action_hash, HTTP_X_API_KEY=cast.globex_key.secret)
    assert other_org.status_code == HTTPStatus.NOT_FOUND
    assert other_org.json() == {"detail": "no such receipt"}
    malformed = proof_of(APIClient(), "zz", HTTP_X_API_KEY=cast.acme_key.secret)
    assert malformed.status_code == HTTPStatus.NOT_FOUND
    bearer = proof_of(APIClient(), action_hash, HTTP_AUTHORIZATION=f"Bearer {cast.acme_key.secret}")
    assert bearer.status_code == HTTPStatus.OK
    assert proof_of(dashboard("auditor"), action_hash).status_code == HTTPStatus.OK
    assert proof_of(dashboard("viewer"), action_hash).status_code == HTTPStatus.FORBIDDEN


def test_the_checkpoint_is_plain_text_whatever_the_accept_header(cast, mirrored) -> None:
    client = APIClient()
    missing = client.get("/v1/log/checkpoint")
    assert missing.status_code == HTTPStatus.NOT_FOUND
    assert missing.json() == {"detail": "no checkpoint has been published yet"}
    result = transparency_publish_epoch()
    answer = client.get("/v1/log/checkpoint", HTTP_ACCEPT="text/html")
    assert answer.status_code == HTTPStatus.OK
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert answer["Cache-Control"] == "public, max-age=5"
    body = note.checkpoint_body(ORIGIN, 2, result.root or b"")
    assert answer.content.decode() == body + "\n"


def test_consistency_proofs_of_the_top_log_verify(cast, mirrored, push) -> None:
    client = APIClient()
    first = transparency_publish_epoch()
    push(Agent().receipt())
    second = transparency_publish_epoch()
    answer = client.get("/v1/log/consistency?first=2&second=3")
    assert answer.status_code == HTTPStatus.OK
    proof = [bytes.fromhex(value) for value in answer.json()["proof"]]
    assert merkle.verify_consistency(2, 3, first.root, second.root, proof)
    for query in (
        "first=0&second=3",
        "first=3&second=2",
        "first=1&second=4",
        "first=x&second=2",
        "second=2",
        "first=1&second=+2",
        "first=01&second=2x",
    ):
        refused = client.get(f"/v1/log/consistency?{query}")
        assert refused.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, query
    assert client.get("/v1/log/consistency?first=3&second=3").json()["proof"] == []


def test_org_consistency_is_between_published_heads_only(cast, mirrored, push) -> None:
    from apps.transparency.models import OrgLog

    client = APIClient()
    transparency_publish_epoch()
    push(Agent().receipt())
    push(Agent().receipt())
    transparency_publish_epoch()
    org_id = OrgLog.objects.get(org=cast.acme).log_id
    answer = client.get(f"/v1/log/orgs/{org_id}/consistency?first=3&second=5")
    assert answer.status_code == HTTPStatus.OK
    found = answer.json()
    assert set(found) == {"org_id", "first", "second", "first_root", "second_root", "proof"}
    assert merkle.verify_consistency(
        3,
        5,
        bytes.fromhex(found["first_root"]),
        bytes.fromhex(found["second_root"]),
        [bytes.fromhex(value) for value in found["proof"]],
    )
    for query in ("first=4&second=5", "first=3&second=6"):
        missing = client.get(f"/v1/log/orgs/{org_id}/consistency?{query}")
        assert missing.status_code == HTTPStatus.NOT_FOUND, query
    unknown = client.get(
        "/v1/log/orgs/olog_aaaaaaaaaaaaaaaaaaaaaaaaaa/consistency?first=1&second=1"
    )
    assert unknown.status_code == HTTPStatus.NOT_FOUND
    bad = client.get(f"/v1/log/orgs/{org_id}/consistency?first=5&second=3")
    assert bad.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_leaves_are_paged_and_name_no_tenant(cast, mirrored) -> None:
    client = APIClient()
    transparency_publish_epoch()
    answer = client.get("/v1/log/leaves?start=0&end=10")
    assert answer.status_code == HTTPStatus.OK
    found = answer.json()
    assert found["start"] == 0
    assert found["end"] == 2
    assert [leaf["index"] for leaf in found["leaves"]] == [0, 1]
    text = answer.content.decode()
    assert "acme" not in text
    assert "globex" not in text
    for query in ("start=2&end=3", "start=1&end=1", "start=-1&end=1", "start=0"):
        assert client.get(f"/v1/log/leaves?{query}").status_code == 422, query


def test_tiles_are_served_immutable_when_covered(cast, mirrored) -> None:
    client = APIClient()
    transparency_publish_epoch()
    tile = client.get("/v1/log/tile/0/000.p/2", HTTP_ACCEPT="application/json")
    assert tile.status_code == HTTPStatus.OK
    assert tile["Content-Type"] == "application/octet-stream"
    assert tile["Cache-Control"] == "public, max-age=31536000, immutable"
    leaves = client.get("/v1/log/leaves?start=0&end=2").json()["leaves"]
    expected = b"".join(
        merkle.leaf_hash(
            note.org_head_leaf(x["org_id"], x["org_tree_size"], bytes.fromhex(x["org_root"]))
        )
        for x in leaves
    )
    assert tile.content == expected
    bundle = client.get("/v1/log/tile/entries/000.p/2")
    assert bundle.status_code == HTTPStatus.OK
    assert len(bundle.content) == 2 * (2 + 106)
    for path in ("0/000.p/3", "0/000", "0/0000.p/1", "0/x000/000.p/1", "64/000.p/1", "0/000.p/01"):
        assert client.get(f"/v1/log/tile/{path}").status_code == HTTPStatus.NOT_FOUND, path


def _submit(size: int, line: object) -> Any:
    return APIClient().post(
        "/v1/log/cosignatures", {"checkpoint_size": size, "cosignature": line}, format="json"
    )


def test_a_registered_witness_cosigns_and_the_checkpoint_carries_it(cast, mirrored) -> None:
    witness_register(name=W1, key=w1_vkey())
    transparency_publish_epoch()
    body = note.checkpoint_body(ORIGIN, 2, transparency_publish_epoch().root or b"")
    now = int(time.time())
    line = note.cosign(W1_SEED, W1, now, body)
    accepted = _submit(2, line + "\n")
    assert accepted.status_code == HTTPStatus.CREATED, accepted.json()
    assert accepted.json()["status"] == "accepted"
    assert accepted.json()["timestamp"] == now
    assert _submit(2, line).json()["status"] == "duplicate"
    newer = note.cosign(W1_SEED, W1, now + 1, body)
    assert _submit(2, newer).status_code == HTTPStatus.OK
    assert Cosignature.objects.get().timestamp == now + 1
    served = APIClient().get("/v1/log/checkpoint").content.decode()
    assert served == body + "\n" + newer + "\n"
    proof = proof_of(APIClient(), mirrored[1], HTTP_X_API_KEY=cast.acme_key.secret).json()
    assert proof["cosignatures"] == [{"witness_key": w1_vkey(), "signature": newer.split(" ")[2]}]
    assert verify_proof(
        action_hash=mirrored[1],
        proof=proof,
        origin=ORIGIN,
        witness_keys=[w1_vkey()],
        required_cosignatures=1,
        org_id=proof["org_id"],
    ).valid


def test_cosignature_refusals_in_order(cast, mirrored) -> None:
    witness_register(name=W1, key=w1_vkey())
    result = transparency_publish_epoch()
    body = note.checkpoint_body(ORIGIN, 2, result.root or b"")
    now = int(time.time())
    stranger = note.cosign(bytes(32), "stranger.example", now, body)
    assert _submit(0, "x").status_code == 422
    assert APIClient().post("/v1/log/cosignatures", [1], format="json").status_code == 422
    assert _submit(2, 5).status_code == 422
    assert _submit(2, "— w1 AAAA").json()["detail"].startswith("not a cosignature")
    assert _submit(2, stranger).status_code == HTTPStatus.FORBIDDEN
    assert _submit(3, note.cosign(W1_SEED, W1, now, body)).status_code == HTTPStatus.NOT_FOUND
    future = note.cosign(W1_SEED, W1, now + 3600, body)
    assert _submit(2, future).status_code == 422
    other_body = note.checkpoint_body(ORIGIN, 2, b"\0" * 32)
    assert _submit(2, note.cosign(W1_SEED, W1, now, other_body)).status_code == 422
    witness_register(name=W1, key=w1_vkey(), deactivate=True)
    assert _submit(2, note.cosign(W1_SEED, W1, now, body)).status_code == HTTPStatus.FORBIDDEN
    assert Cosignature.objects.count() == 0


def test_witnesses_are_listed_for_discovery(cast) -> None:
    assert witness_register(name=W1, key=w1_vkey()).status == "registered"
    assert witness_register(name=W1, key=w1_vkey()).status == "unchanged"
    other = note.b64(bytes(SigningKey(bytes(31) + b"\1").verify_key))
    assert witness_register(name=W1, key=other).status == "rotated"
    found = APIClient().get("/v1/log/witnesses").json()["witnesses"]
    new_vkey = note.vkey_of(W1, note.b64decode_strict(other) or b"")
    assert {(w["vkey"], w["active"]) for w in found} == {(w1_vkey(), False), (new_vkey, True)}
    assert [w["key_id"] for w in found] == sorted(w["key_id"] for w in found)
