"""The OpenAPI documents of both profiles: valid, complete, served, and the docs page local."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from http import HTTPStatus
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.urls import URLPattern, URLResolver
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate
from rest_framework.test import APIClient

from apps.api.openapi import TEAMPATH_ERROR_CODES, profile_document
from apps.approvals.services import approver_key_register
from tests.approvals.conftest import Approver, suspended_receipt
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TeamPathCaller

PROFILES = ("keyscoped", "teampath")
METHODS = ("get", "post", "put", "patch", "delete")

# Routes that are not part of the JSON API: the Django admin (the console), the root (a
# redirect to it), the console's browser pages, and the description itself.
NOT_DESCRIBED = {"/", "/admin/", "/v1/schema", "/v1/docs"}
# The console's pages, and SCIM 2.0 (described by its own RFCs and discovery routes).
CONSOLE_PAGES = re.compile(r"^/(verify|approve/|approvals$|invitations/|sso/|scim/)")
PROBES = {"/healthz", "/readyz"}


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return {profile: profile_document(profile) for profile in PROFILES}


def openapi_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def routes(profile: str) -> dict[str, URLPattern]:
    """Every routed path of the profile's root URL conf (includes flattened)."""
    found: dict[str, URLPattern] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if route == "admin/":
                    found["/admin/"] = pattern  # type: ignore[assignment]
                    continue
                walk(pattern.url_patterns, route)
            else:
                found[openapi_path(route)] = pattern

    walk(import_module(f"config.urls.{profile}").urlpatterns, "")
    return found


def described_routes(profile: str) -> dict[str, URLPattern]:
    return {
        path: pattern
        for path, pattern in routes(profile).items()
        if path not in NOT_DESCRIBED and not CONSOLE_PAGES.match(path)
    }


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


@pytest.mark.parametrize("profile", PROFILES)
def test_each_document_is_valid_openapi_3(documents, profile):
    document = documents[profile]
    validate(document)
    assert document["openapi"].startswith("3.")


@pytest.mark.parametrize("profile", PROFILES)
def test_every_route_of_the_profile_is_described_and_nothing_else(documents, profile):
    expected = described_routes(profile)
    assert set(documents[profile]["paths"]) == set(expected)
    # The exclusions are real routes of the profile, so the list cannot go stale silently.
    assert set(routes(profile)) >= NOT_DESCRIBED


@pytest.mark.parametrize("profile", PROFILES)
def test_each_path_describes_exactly_the_methods_its_view_serves(documents, profile):
    for path, pattern in described_routes(profile).items():
        view = getattr(pattern.callback, "cls", None)
        served = (
            {m for m in METHODS if hasattr(view, m)} if view is not None else {"get"}
        )  # a plain Django view (/metrics) answers GET
        described = {m for m in documents[profile]["paths"][path] if m in METHODS}
        assert described == served, path


def test_the_profiles_do_not_mix(documents):
    keyscoped, teampath = documents["keyscoped"], documents["teampath"]
    assert "/v1/teams/{team_id}/policy" not in keyscoped["paths"]
    assert "/v1/receipts/batch" not in keyscoped["paths"]
    assert "/v1/policy/pull" not in teampath["paths"]
    assert "/v1/audit/chain" not in teampath["paths"]
    assert "TeamPathError" not in keyscoped["components"]["schemas"]
    assert "Error" not in teampath["components"]["schemas"]
    assert set(teampath["components"]["securitySchemes"]) == {"BearerApiKey"}


# Answers that are files, not JSON: the evidence tar.
BINARY_ANSWERS = {
    ("/v1/evidence/export", "200"): "application/x-tar",
    ("/v1/evidence/exports/{export_id}/download", "200"): "application/x-tar",
    # The transparency log's checkpoint note and tiles (transparency.md §5.3, §6).
    ("/v1/log/checkpoint", "200"): "text/plain",
    ("/v1/log/tile/{tile}", "200"): "application/octet-stream",
}


@pytest.mark.parametrize("profile", PROFILES)
def test_every_operation_describes_its_body_successes_and_errors(documents, profile):
    for path, method, operation in operations(documents[profile]):
        where = f"{method.upper()} {path}"
        assert operation.get("operationId"), where
        assert operation.get("summary"), where
        statuses = set(operation["responses"])
        assert any(status.startswith("2") for status in statuses), where
        if method == "post":
            body = operation["requestBody"]
            assert set(body["content"]) == {"application/json"}, where
            # Required exactly when a member is: a body of optional members may be left out.
            target = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
            members = documents[profile]["components"]["schemas"][target].get("required")
            assert body.get("required", False) is bool(members), where
        if path == "/metrics":
            continue
        if path not in PROBES:  # the capacity middleware's 503 spares the probes
            assert "503" in statuses, where
        for status, response in operation["responses"].items():
            assert response.get("description"), (where, status)
            if (path, status) in BINARY_ANSWERS:
                assert set(response["content"]) == {BINARY_ANSWERS[path, status]}, where
                continue
            assert "application/json" in response.get("content", {}), (where, status)


def _schema_refs(schema: dict[str, Any]) -> set[str]:
    refs = set()
    if "$ref" in schema:
        refs.add(schema["$ref"].rsplit("/", 1)[1])
    for part in schema.get("allOf", []):
        refs |= _schema_refs(part)
    return refs


def test_key_scoped_errors_are_detail_bodies(documents):
    document = documents["keyscoped"]
    for path, method, operation in operations(document):
        for status, response in operation["responses"].items():
            if status.startswith("2") or path == "/metrics" or path == "/readyz":
                continue
            names = _schema_refs(response["content"]["application/json"]["schema"])
            assert len(names) == 1, (path, method, status)
            schema = document["components"]["schemas"][names.pop()]
            assert "detail" in schema["required"], (path, method, status)


def test_team_path_errors_carry_a_code_of_the_catalogue(documents):
    document = documents["teampath"]
    error = document["components"]["schemas"]["TeamPathError"]
    assert error["required"] == ["error", "message"]
    assert error["properties"]["error"]["enum"] == list(TEAMPATH_ERROR_CODES)
    for path, method, operation in operations(document):
        for status, response in operation["responses"].items():
            if status.startswith("2") or path in ("/metrics", "/readyz"):
                continue
            schema = response["content"]["application/json"]["schema"]
            assert "TeamPathError" in _schema_refs(schema), (path, method, status)
            codes = schema["allOf"][1]["properties"]["error"]["enum"]
            assert set(codes) <= set(TEAMPATH_ERROR_CODES), (path, method, status)


def test_the_error_enum_covers_the_published_catalogue():
    catalogue = (Path(settings.BASE_DIR) / "docs" / "teampath-errors.md").read_text()
    published = set(re.findall(r"^\| \d{3} \| `(\w+)` \|", catalogue, flags=re.MULTILINE))
    assert len(published) > 20
    assert published <= set(TEAMPATH_ERROR_CODES)


def test_security_schemes_follow_the_planes(documents):
    keyscoped = documents["keyscoped"]
    schemes = keyscoped["components"]["securitySchemes"]
    assert schemes["ApiKeyHeader"] == {
        "type": "apiKey",
        "in": "header",
        "name": "x-api-key",
        "description": schemes["ApiKeyHeader"]["description"],
    }
    assert schemes["ApiKeyBearer"]["scheme"] == "bearer"
    assert schemes["SessionJwt"]["bearerFormat"] == "JWT"
    sdk = [{"ApiKeyHeader": []}, {"ApiKeyBearer": []}]
    security = {
        (path, method): operation.get("security")
        for path, method, operation in operations(keyscoped)
    }
    assert security[("/v1/receipts", "post")] == sdk
    assert security[("/v1/policy/pull", "get")] == sdk
    assert security[("/v1/approvals/{action_hash}", "get")] == sdk
    for dashboard in ("/v1/policy", "/v1/policy/preview"):
        assert security[(dashboard, "post")] == [{"SessionJwt": []}]
    assert security[("/v1/audit/chain", "get")] == [{"SessionJwt": []}]
    assert security[("/v1/analytics", "get")] == [{"SessionJwt": []}]
    teampath = documents["teampath"]
    for path, method, operation in operations(teampath):
        if path.startswith("/v1/log/"):  # the public transparency log: no credential
            assert not operation.get("security"), (path, method)
        elif path.startswith("/v1/"):
            assert operation["security"] == [{"BearerApiKey": []}], (path, method)
    assert security[("/v1/receipts/{action_hash}/proof", "get")] == [*sdk, {"SessionJwt": []}]
    assert not security[("/v1/log/checkpoint", "get")]


@pytest.mark.django_db  # a request through every middleware (org context)
@pytest.mark.parametrize("profile", PROFILES)
def test_the_schema_route_serves_the_profiles_own_document(settings, profile):
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    settings.API_PROFILE = profile
    response = APIClient().get("/v1/schema", HTTP_ACCEPT="application/json")
    assert response.status_code == HTTPStatus.OK
    served = response.json()
    assert served["paths"].keys() == profile_document(profile)["paths"].keys()
    validate(served)
    yaml = APIClient().get("/v1/schema")
    assert yaml.status_code == HTTPStatus.OK
    assert yaml.content.startswith(b"openapi: 3.0.3")


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.urls.append(value)


@pytest.mark.django_db  # a request through every middleware (org context)
@pytest.mark.parametrize("profile", PROFILES)
def test_the_docs_page_loads_its_assets_from_this_service_only(settings, profile):
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    response = APIClient().get("/v1/docs")
    assert response.status_code == HTTPStatus.OK
    html = response.content.decode()
    assert re.search(r"(?i)\b(https?:)?//[a-z0-9]", html) is None  # no absolute URL at all
    assert 'url: "/v1/schema"' in html
    assets = _Assets()
    assets.feed(html)
    scripts = [url for url in assets.urls if url.endswith(".js")]
    assert len(scripts) >= 2
    for url in assets.urls:
        assert url.startswith("/static/"), url
        assert finders.find(url.removeprefix("/static/")), url


# --- The documented happy paths: real flows, each answer checked against its document ---


def assert_documented(document: dict[str, Any], method: str, path: str, response: Any) -> Any:
    """The answer's status is documented for the operation and its body matches the schema."""
    answers = document["paths"][path][method]["responses"]
    status = str(response.status_code)
    assert status in answers, (method, path, status, response.content)
    schema = answers[status]["content"]["application/json"]["schema"]
    body = response.json()
    OAS30Validator({**schema, "components": document["components"]}).validate(body)
    return body


@pytest.mark.django_db
def test_the_key_scoped_happy_paths_answer_as_documented(documents, cast, push, dashboard):
    document = documents["keyscoped"]
    sdk = APIClient()
    sdk.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    for approver in (Approver("alice"), Approver("bob")):
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    agent = Agent()
    receipt = suspended_receipt(agent)
    action_hash = receipt["content"]["action_hash"]

    assert_documented(document, "post", "/v1/receipts", push(receipt))  # 201
    assert_documented(document, "post", "/v1/receipts", push(receipt))  # 200 duplicate
    assert_documented(document, "post", "/v1/receipts", push(agent.receipt(), supersedes="0" * 64))
    opened = sdk.post("/v1/approvals", {"action_hash": action_hash}, format="json")
    assert assert_documented(document, "post", "/v1/approvals", opened)["status"] == "pending"
    detail = sdk.get(f"/v1/approvals/{action_hash}")
    assert_documented(document, "get", "/v1/approvals/{action_hash}", detail)
    assembly = sdk.get(f"/v1/approvals/{action_hash}/assembly")
    assert_documented(document, "get", "/v1/approvals/{action_hash}/assembly", assembly)
    assert_documented(document, "get", "/v1/policy/pull", sdk.get("/v1/policy/pull"))

    auditor, manager = dashboard("auditor"), dashboard("manager")
    chain = assert_documented(document, "get", "/v1/audit/chain", auditor.get("/v1/audit/chain"))
    assert chain["entries"]
    assert_documented(document, "get", "/v1/analytics", auditor.get("/v1/analytics"))
    deployed = manager.post("/v1/policy", {"toml": "", "expected_policy_hash": "0" * 64})
    assert_documented(document, "post", "/v1/policy", deployed)  # 409 stale pin
    preview = manager.post("/v1/policy/preview", {"toml": ""}, format="json")
    assert_documented(document, "post", "/v1/policy/preview", preview)
    assert_documented(document, "get", "/v1/analytics", APIClient().get("/v1/analytics"))  # 401


@pytest.mark.django_db
def test_the_team_path_happy_paths_answer_as_documented(documents, cast, settings):
    settings.ROOT_URLCONF = "config.urls.teampath"
    settings.API_PROFILE = "teampath"
    document = documents["teampath"]
    acme = TeamPathCaller(cast.acme_key.secret)
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id=alice.name)
    agent = Agent()
    receipt = suspended_receipt(agent)
    tampered = agent.receipt()
    tampered["content"]["verb"] = "tampered"

    assert_documented(document, "post", "/v1/receipts", acme.push(receipt))  # 201
    assert_documented(document, "post", "/v1/receipts", acme.push(receipt))  # 200
    assert_documented(document, "post", "/v1/receipts", acme.push(tampered))  # 422
    batch = acme.batch([agent.receipt(), tampered, "[]"])
    results = assert_documented(document, "post", "/v1/receipts/batch", batch)
    assert [result["accepted"] for result in results] == [True, False, False]

    body = '{"receipt":' + as_text(receipt) + ',"routingHint":"oncall"}'
    opened = assert_documented(document, "post", "/v1/approvals", acme.post("/v1/approvals", body))
    again = acme.post("/v1/approvals", body)
    assert "token" not in assert_documented(document, "post", "/v1/approvals", again)
    poll = "/v1/approvals/{approval_id}"
    url = f"/v1/approvals/{opened['approvalId']}"
    assert_documented(document, "get", poll, acme.get(url))
    token = alice.token(receipt["content"], scope="payments.review")
    settled = acme.post(url + "/token", {"token": token})
    assert_documented(document, "post", poll + "/token", settled)
    assert assert_documented(document, "get", poll, acme.get(url))["approval"]["votes"]
    replayed = acme.post(url + "/token", {"token": token})  # 409 approval_settled
    assert_documented(document, "post", poll + "/token", replayed)
    policy = acme.get("/v1/teams/acme/policy")  # 404 policy_not_found
    assert_documented(document, "get", "/v1/teams/{team_id}/policy", policy)
