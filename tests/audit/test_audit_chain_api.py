"""GET /v1/audit/chain: newest-first windows that a verifier can recompute."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
from tests.receipts.factories import Agent


@pytest.fixture
def mirrored(cast, push) -> list[dict]:
    agent = Agent()
    receipts = [agent.receipt() for _ in range(5)]
    for receipt in receipts:
        assert push(receipt).status_code == HTTPStatus.CREATED
    return receipts


def test_an_empty_chain_has_the_zero_head(cast, dashboard) -> None:
    body = dashboard("auditor").get("/v1/audit/chain").json()
    assert body == {"head": EMPTY_CHAIN_HEAD, "size": 0, "entries": [], "next": None}


def test_the_chain_is_newest_first_and_every_link_recomputes(cast, dashboard, mirrored) -> None:
    body = dashboard("auditor").get("/v1/audit/chain").json()
    assert body["size"] == 5
    entries = body["entries"]
    assert [entry["seq"] for entry in entries] == [5, 4, 3, 2, 1]
    assert body["head"] == entries[0]["chain_hash"]
    assert body["next"] is None
    prev = EMPTY_CHAIN_HEAD
    for entry in reversed(entries):
        assert entry["prev_chain_hash"] == prev
        assert entry["receipt_digest"] == receipt_digest(entry["receipt"])
        recomputed = chain_hash(
            prev_chain_hash=prev,
            seq=entry["seq"],
            action_hash=entry["action_hash"],
            receipt_digest_hex=entry["receipt_digest"],
            supersedes_action_hash=entry["supersedes_action_hash"] or "",
        )
        assert recomputed == entry["chain_hash"]
        prev = entry["chain_hash"]
    assert set(entries[0]) >= {
        "seq", "action_hash", "trust_level", "receipt_digest", "supersedes_action_hash",
        "superseded_by", "prev_chain_hash", "chain_hash", "received_at",
    }  # fmt: skip
    assert [entry["action_hash"] for entry in reversed(entries)] == [
        receipt["content"]["action_hash"] for receipt in mirrored
    ]


def test_pages_follow_next_until_the_first_entry(cast, dashboard, mirrored) -> None:
    client = dashboard("auditor")
    first = client.get("/v1/audit/chain?limit=2").json()
    assert [e["seq"] for e in first["entries"]] == [5, 4]
    assert first["next"] == 4
    second = client.get(f"/v1/audit/chain?limit=2&before={first['next']}").json()
    assert [e["seq"] for e in second["entries"]] == [3, 2]
    third = client.get(f"/v1/audit/chain?limit=2&before={second['next']}").json()
    assert [e["seq"] for e in third["entries"]] == [1]
    assert third["next"] is None
    # Every page reports the whole chain's head and size.
    assert {page["head"] for page in (first, second, third)} == {first["entries"][0]["chain_hash"]}
    assert {page["size"] for page in (first, second, third)} == {5}
    # A window links to the one before it.
    assert second["entries"][0]["chain_hash"] == first["entries"][-1]["prev_chain_hash"]


def test_an_exact_last_page_still_ends_with_next_null(cast, dashboard, mirrored) -> None:
    body = dashboard("auditor").get("/v1/audit/chain?limit=1&before=2").json()
    assert [e["seq"] for e in body["entries"]] == [1]
    assert body["next"] is None


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "limit=x", "before=0", "before=-3"])
def test_bad_paging_parameters_are_422(cast, dashboard, query) -> None:
    response = dashboard("auditor").get(f"/v1/audit/chain?{query}")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "detail" in response.json()


def test_the_default_page_is_100_and_the_maximum_1000(cast, dashboard) -> None:
    from apps.api.keyscoped.audit import DEFAULT_LIMIT, MAX_LIMIT

    assert (DEFAULT_LIMIT, MAX_LIMIT) == (100, 1000)


@pytest.mark.parametrize(
    ("caller", "status"),
    [
        pytest.param("anonymous", HTTPStatus.UNAUTHORIZED, id="no-credential"),
        pytest.param("api-key-bearer", HTTPStatus.UNAUTHORIZED, id="api-key-as-bearer"),
        pytest.param("api-key-header", HTTPStatus.UNAUTHORIZED, id="api-key-as-x-api-key"),
        pytest.param("viewer", HTTPStatus.FORBIDDEN, id="viewer"),
        pytest.param("auditor", HTTPStatus.OK, id="auditor"),
        pytest.param("manager", HTTPStatus.OK, id="manager"),
        pytest.param("owner", HTTPStatus.OK, id="owner"),
    ],
)
def test_authorization_matrix(cast, dashboard, mirrored, caller, status) -> None:
    client = APIClient()
    if caller == "api-key-bearer":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.acme_key.secret}")
    elif caller == "api-key-header":
        client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    elif caller != "anonymous":
        client = dashboard(caller)
    response = client.get("/v1/audit/chain")
    assert response.status_code == status
    if status == HTTPStatus.OK:
        assert response.json()["size"] == 5


def test_another_orgs_member_sees_only_their_own_chain(cast, dashboard, mirrored) -> None:
    from apps.tenancy.models import Role
    from apps.tenancy.services import membership_add

    membership_add(org=cast.globex, username="globex-auditor", role=Role.AUDITOR)
    body = dashboard("auditor", org_slug="globex").get("/v1/audit/chain").json()
    assert (body["size"], body["entries"]) == (0, [])
