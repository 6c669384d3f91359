"""Each input refusal finding, one test each: the input that gave a 500 (or Django's HTML
page, or a last-wins read) and the 4xx in the profile's error body it gets now, with no log
record at ERROR. The whole corpus over every route is tests/common/test_hostile_input.py;
receipts with a NUL are tests/receipts/test_nul_in_receipts.py."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from apps.approvals.services import approval_open, approver_key_register
from apps.receipts.verifier import verify_receipt
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import Scope
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import api_key_issue
from tests.approvals.conftest import Approver, suspended_receipt
from tests.receipts.factories import Agent
from tests.teampath_fixtures import TeamPathCaller, assert_error

HEX = "ab" * 32
DEEP = "[" * 10_000 + "]" * 10_000


@pytest.fixture(autouse=True)
def no_error_logs(caplog: pytest.LogCaptureFixture) -> Any:
    """Every test here: no log record at ERROR or above (a traceback per request was the
    flood an anonymous caller could cause)."""
    caplog.set_level(logging.INFO)
    yield
    errors = [r.getMessage()[:200] for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors


@pytest.fixture
def every_scope(cast: Any) -> APIClient:
    key = api_key_issue(org=cast.acme, scopes=list(Scope), label="every scope")
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key.secret)
    return client


@pytest.fixture
def teampath(cast: Any, settings: Any) -> TeamPathCaller:
    settings.ROOT_URLCONF = "config.urls.teampath"
    settings.API_PROFILE = "teampath"
    return TeamPathCaller(cast.acme_key.secret)


def post_raw(client: Any, path: str, body: str | bytes, content_type: str = "application/json"):
    return client.generic("POST", path, body, content_type=content_type)


def detail(response: Any) -> str:
    body = response.json()
    assert set(body) >= {"detail"}, body
    assert isinstance(body["detail"], str)
    return body["detail"]


# --- The DRF-parsed routes (key-scoped) ------------------------------------------------------


def drf_callers(cast: Any, every_scope: APIClient, dashboard: Any) -> dict[str, Any]:
    session = Client()
    session.force_login(get_user_model().objects.get(username="acme-owner"))
    return {
        "/v1/approvals": every_scope,
        "/v1/orgs/register-approver-pubkey": every_scope,
        "/v1/policy": dashboard("owner"),
        "/v1/policy/preview": dashboard("owner"),
        "/v1/evidence/export": dashboard("owner"),
        "/v1/console/token": session,
        "/v1/console/token/refresh": APIClient(),  # no credential at all
    }


DRF_ROUTES = [
    "/v1/approvals",
    "/v1/orgs/register-approver-pubkey",
    "/v1/policy",
    "/v1/policy/preview",
    "/v1/evidence/export",
    "/v1/console/token",
    "/v1/console/token/refresh",
]


@pytest.mark.parametrize("path", DRF_ROUTES)
def test_deep_json_on_a_drf_route_is_422_not_a_500(path, cast, every_scope, dashboard) -> None:
    caller = drf_callers(cast, every_scope, dashboard)[path]
    response = post_raw(caller, path, DEEP)
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "invalid JSON body: nesting deeper than 128 arrays/objects"
    one_past = '{"x":' + "[" * 128 + "]" * 128 + "}"
    assert "nesting deeper" in detail(post_raw(caller, path, one_past))


@pytest.mark.parametrize("path", DRF_ROUTES)
def test_an_oversize_body_on_a_drf_route_is_413_json(
    path, cast, every_scope, dashboard, settings
) -> None:
    settings.JSON_BODY_MAX_BYTES = 2048
    caller = drf_callers(cast, every_scope, dashboard)[path]
    response = post_raw(caller, path, json.dumps({"pad": "x" * 4000}))
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert response["Content-Type"] == "application/json"
    assert detail(response) == "request body larger than 2048 bytes"


@pytest.mark.parametrize("path", DRF_ROUTES)
def test_a_repeated_member_name_on_a_drf_route_is_refused(
    path, cast, every_scope, dashboard
) -> None:
    caller = drf_callers(cast, every_scope, dashboard)[path]
    response = post_raw(caller, path, '{"a":"1","b":{"c":1,"c":2},"a":"2"}')
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "invalid JSON body: $.b.c: repeated member name"


@pytest.mark.parametrize("path", DRF_ROUTES)
def test_a_nul_in_a_drf_body_is_refused_before_anything_reads_it(
    path, cast, every_scope, dashboard
) -> None:
    caller = drf_callers(cast, every_scope, dashboard)[path]
    response = post_raw(caller, path, '{"toml":"x","org":"acme\\u0000","from":"2026-01-01"}')
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "invalid JSON body: $.org: U+0000 (NUL) is not allowed in a string"


def test_repeated_names_no_longer_mean_last_wins(every_scope) -> None:
    first, last = "11" * 32, "22" * 32
    body = f'{{"action_hash":"{first}","action_hash":"{last}"}}'
    response = post_raw(every_scope, "/v1/approvals", body)
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "repeated member name" in detail(response)


def test_a_nul_in_matched_conditions_never_reaches_the_database(every_scope) -> None:
    body = {"action_hash": HEX, "matched_conditions": [{"field": "verb", "value": "x\0"}]}
    response = every_scope.post("/v1/approvals", body, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "U+0000" in detail(response)


def test_integers_beyond_the_range_are_refused(every_scope) -> None:
    for number in ("18446744073709551616", "1" * 5000, "1e999999"):
        body = f'{{"action_hash":"{HEX}","threshold":{number}}}'
        response = post_raw(every_scope, "/v1/approvals", body)
        assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
        assert "$.threshold" in detail(response)


def test_any_json_media_type_is_read_and_others_are_422(every_scope) -> None:
    body = json.dumps({"action_hash": HEX})
    response = post_raw(every_scope, "/v1/approvals", body, "application/vnd.heso+json")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    response = post_raw(every_scope, "/v1/approvals", body, "text/plain")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "text/plain" in detail(response)
    # A form is refused before anything (a CSRF check) could parse it as one.
    response = post_raw(every_scope, "/v1/approvals", "a=1", "application/x-www-form-urlencoded")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "application/json" in detail(response)


def test_an_empty_body_said_to_be_json_is_refused_but_no_body_keeps_its_meaning(
    dashboard,
) -> None:
    auditor = dashboard("auditor")
    response = auditor.generic("POST", "/v1/evidence/export", content_type="application/json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "invalid JSON body: the body is empty"
    # No body and no Content-Type: the export's documented default window (everything).
    assert auditor.post("/v1/evidence/export").status_code == HTTPStatus.OK


# --- Raw-body routes --------------------------------------------------------------------------


def test_submit_token_refuses_repeated_names_and_nul_in_its_own_members(every_scope) -> None:
    path = f"/v1/approvals/{HEX}/submit-token"
    response = post_raw(every_scope, path, '{"token_b64":"AAAA","token_b64":"AAAA"}')
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "the body repeats a member name"
    response = post_raw(every_scope, path, '{"token_b64":"AAAA","reason":"\\u0000"}')
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "$.reason: U+0000 (NUL) is not allowed in a string"
    response = post_raw(every_scope, path, '{"token_b64":"AAAA","extra\\u0000":1}')
    assert "member name" in detail(response)


def test_the_receipt_push_holds_its_other_members_to_the_plain_rules(push) -> None:
    text = json.dumps(Agent().receipt())
    for extra, reason in (
        ('"note":"\\u0000"', "$.note: U+0000"),
        ('"n":' + "1" * 5000, "$.n: integer outside"),
        ('"deep":' + DEEP, "nesting deeper than 128"),
    ):
        response = push.raw('{"receipt":' + text + "," + extra + "}")
        assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
        assert reason in detail(response)


def test_a_team_path_routing_hint_with_a_nul_is_400_validation_failed(teampath, cast) -> None:
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    body = json.dumps({"receipt": suspended_receipt(Agent()), "routingHint": "on\0call"})
    body_error = assert_error(
        teampath.post("/v1/approvals", body), HTTPStatus.BAD_REQUEST, "validation_failed"
    )
    assert body_error["message"] == "$.routingHint: U+0000 (NUL) is not allowed in a string"


def test_team_path_bodies_refuse_deep_json_and_the_token_route_keeps_its_own_limit(
    teampath,
) -> None:
    for path in ("/v1/receipts", "/v1/receipts/batch", "/v1/approvals", "/v1/approvals/x/token"):
        assert_error(teampath.post(path, DEEP), HTTPStatus.BAD_REQUEST, "invalid_json")
    big = json.dumps({"token": "A" * 70_000})
    response = teampath.post("/v1/approvals/apr_x/token", big)
    assert_error(response, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large")


# --- NUL in paths and query strings --------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/approvals/%00",
        f"/v1/approvals/{HEX}%00",
        f"/v1/approvals/{HEX}%00/assembly",
        "/v1/policy/pull?x=%00",
    ],
)
def test_key_scoped_nul_in_an_approval_id_is_422(path, every_scope) -> None:
    response = every_scope.get(path)
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response).startswith("U+0000 (NUL) is not allowed in the ")


def test_key_scoped_nul_in_a_submit_token_path_is_422(every_scope) -> None:
    response = post_raw(every_scope, f"/v1/approvals/{HEX}%00/submit-token", "{}")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "U+0000 (NUL) is not allowed in the path"


@pytest.mark.parametrize(
    "path", ["/v1/approvals/%00", "/v1/approvals/apr_x%00", "/v1/teams/acme%00/policy"]
)
def test_team_path_nul_in_an_approval_id_is_400_validation_failed(path, teampath) -> None:
    assert_error(teampath.get(path), HTTPStatus.BAD_REQUEST, "validation_failed")
    token = json.dumps({"token": "AAAA"})
    response = teampath.post("/v1/approvals/apr_x%00/token", token)
    assert_error(response, HTTPStatus.BAD_REQUEST, "validation_failed")


@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
@pytest.mark.parametrize(
    "path",
    [
        "/admin/receipts/mirrorentry/?trust_level=%00",
        "/admin/receipts/mirrorentry/?trust_level__exact=%00",
        "/admin/approvals/approval/?status=%00",
        "/admin/approvals/approval/?status__exact=%00",
        "/admin/tenancy/org/?q=%00",
        "/admin/approvals/approval/%00/change/",
    ],
)
def test_admin_list_filters_with_a_nul_are_a_plain_400(path, profile, cast, settings) -> None:
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    settings.API_PROFILE = profile
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    response = client.get(path)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response["Content-Type"].startswith("text/plain")
    assert b"U+0000 (NUL) is not allowed" in response.content


def test_a_nul_in_a_credential_header_is_refused_before_any_lookup(cast) -> None:
    client = APIClient()
    response = client.get("/v1/policy/pull", HTTP_X_API_KEY=cast.acme_key.secret + "\0")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert detail(response) == "U+0000 (NUL) is not allowed in a header"


# --- The console's JSON endpoint -------------------------------------------------------------


@pytest.fixture
def vote_path(cast: Any) -> str:
    receipt = suspended_receipt(Agent())
    decoded = verify_receipt(json.dumps(receipt)).receipt
    assert decoded is not None
    opened = approval_open(
        org=cast.acme,
        action_hash=receipt["content"]["action_hash"],
        suspended_content=json.loads(decoded.stored_text)["content"],
    )
    activate_default()
    return f"/approve/{opened.approval.approval_id}/vote"


@pytest.fixture
def member() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username="acme-viewer"))
    return client


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (DEEP, "nesting deeper than 128"),
        ('{"token":"a","token":"b"}', "repeated member name"),
        ('{"token":"a\\u0000"}', "U+0000"),
        (b'{"token":"\xff"}', "UTF-8"),
        ('{"token":"\\ud800"}', "lone surrogate"),
        ('{"token":1e999999}', "number too large"),
    ],
)
def test_the_console_vote_endpoint_uses_the_same_parser(body, reason, vote_path, member) -> None:
    response = post_raw(member, vote_path, body)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    answer = response.json()
    assert answer["error"] == "invalid_json"
    assert reason in answer["message"]


def test_the_console_vote_endpoint_answers_413_and_nul_paths_in_json(vote_path, member) -> None:
    response = post_raw(member, vote_path, json.dumps({"token": "A" * 70_000}))
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert response.json()["error"] == "payload_too_large"
    response = post_raw(member, vote_path.replace("/vote", "%00/vote"), "{}")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json() == {
        "error": "validation_failed",
        "message": "U+0000 (NUL) is not allowed in the path",
    }


# --- Views without a profile base class, and Django's own 400s ----------------------------


@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
def test_the_probes_answer_refusals_in_the_profile_body(profile, settings, db) -> None:
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    settings.API_PROFILE = profile
    client = Client()
    for path in ("/healthz", "/readyz"):
        response = client.post(path, "{}", content_type="application/json")
        assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED
        body = response.json()
        if profile == "teampath":
            assert body["error"] == "method_not_allowed"
        else:
            assert "detail" in body


@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
def test_a_host_not_allowed_is_400_in_the_profile_body(profile, settings, db) -> None:
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    settings.API_PROFILE = profile
    response = Client().get("/v1/receipts", HTTP_HOST="evil.example")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body == (
        {"error": "bad_request", "message": "host not allowed"}
        if profile == "teampath"
        else {"detail": "host not allowed"}
    )


def test_too_many_form_fields_at_the_console_sign_in_are_a_plain_400(db) -> None:
    client = Client(enforce_csrf_checks=True)
    client.get("/admin/login/")  # the CSRF cookie: the check would read the form next
    fields = "&".join(f"f{i}=1" for i in range(1001))
    response = client.generic(
        "POST", "/admin/login/", fields, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response["Content-Type"].startswith("text/plain")


def test_the_session_token_route_never_parses_a_form(cast) -> None:
    client = Client(enforce_csrf_checks=True)
    user = get_user_model().objects.get(username="acme-owner")
    client.force_login(user)
    console_tokens_issue(user=user, org_slug="acme")
    activate_default()
    response = client.generic(
        "POST", "/v1/console/token", b"--x\r\n\r\n--x--", content_type="multipart/form-data"
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "application/json" in detail(response)
