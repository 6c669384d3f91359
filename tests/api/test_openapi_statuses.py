"""Each operation lists every status its route answers: its own refusals, and the refusals
of a request as a whole that every route answers (``apps.common.request_guard``)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.api.openapi import profile_document

PROFILES = ("keyscoped", "teampath")
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return {profile: profile_document(profile) for profile in PROFILES}


def statuses(document: dict[str, Any], method: str, path: str) -> set[str]:
    return set(document["paths"][path][method]["responses"])


def test_the_key_scoped_approval_poll_lists_the_ambiguous_ticket(documents) -> None:
    # approval_get refuses a suspend ticket shared by two suspended receipts: 409.
    assert "409" in statuses(documents["keyscoped"], "get", "/v1/approvals/{action_hash}")


def test_the_policy_preview_lists_the_floor_bypass(documents) -> None:
    # The draft is validated as a deploy would: a floor bypass is 409 with `rule_id`.
    answer = documents["keyscoped"]["paths"]["/v1/policy/preview"]["post"]["responses"]["409"]
    schema = answer["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/PolicyConflict"}


def test_a_vote_after_expiry_is_409_key_scoped_and_410_team_path(documents) -> None:
    # server.md §6: the key-scoped route answers an expired approval 409, never 410.
    keyscoped = documents["keyscoped"]["paths"]["/v1/approvals/{action_hash}/submit-token"]
    assert "expired" in keyscoped["post"]["responses"]["409"]["description"]
    assert "410" not in keyscoped["post"]["responses"]
    teampath = documents["teampath"]["paths"]["/v1/approvals/{approval_id}/token"]
    assert "410" in teampath["post"]["responses"]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_operation_lists_the_refusals_of_any_request(documents, profile) -> None:
    # A Host not allowed or too many query parameters (400), a declared body over the limit
    # (413), U+0000 in the path, query or a header (key-scoped 422, team-path 400).
    expected = {"400", "413", "422"} if profile == "keyscoped" else {"400", "413"}
    document = documents[profile]
    missing = {
        f"{method.upper()} {path}": sorted(expected - statuses(document, method, path))
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS and path != "/metrics" and expected - statuses(document, method, path)
    }
    assert missing == {}
