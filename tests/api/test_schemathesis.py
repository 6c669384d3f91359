"""Schemathesis fuzzes both profiles through WSGI against their own OpenAPI documents.

For every operation of each profile's document: the coverage phase's cases (each
constraint's edges and negations, every method the route does not list, required
headers left out) and 25 deterministic generated examples (positive and negative), sent
in-process to Django's WSGI handler inside the test's database transaction, with the
fixed cast's credentials injected for the operation's security scheme. Every conformance
check runs on every answer: no 5xx; only documented statuses, content types, headers and
bodies; a request the document allows is not refused, one it forbids is; an unlisted
method gets 405 with ``Allow``; a route that declares a credential refuses a request
without one.

Where whether a schema-valid request succeeds depends on more than its shape (a signed
receipt or token, TOML that parses, a size within the log as it stands, a URL Django
reads as one), that route's documented refusal is also an accepted answer to it
(``DATA_DEPENDENT``); every other check still applies there.
"""

from __future__ import annotations

import socket
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from apps.api.openapi import profile_document
from apps.common.json_text import INTEGER_MAX, INTEGER_MIN
from apps.policy.services import policy_deploy
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import Scope
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import api_key_issue
from tests.policy.test_teampath_policy_api import POLICY

# Per profile, the routes that may refuse a schema-valid request with their documented
# validation answer (422 key-scoped; 400 `validation_failed` or 422 team-path), and why.
LOG = {
    "/v1/log/(consistency|leaves|orgs/[^/]+/consistency)$": "sizes within the log as it is",
    "/v1/log/cosignatures$": "a registered witness's valid signature line",
}
DATA_DEPENDENT = {
    "keyscoped": {
        **LOG,
        "/v1/receipts$": "a signed receipt that verifies",
        "/v1/approvals/[^/]+/submit-token$": "a signed approval token and the content it signs",
        "/v1/policy(/preview)?$": "TOML that parses into a policy",
        "/v1/evidence/exports?$": "a window whose `from` is not after its `to`",
        "/v1/webhooks(/[^/]+)?$": "a URL Django reads as one (a JSON Schema `uri` is wider)",
        "/v1/legal-holds(/[^/]+/release)?$": "a scope with its own members only (`range`: "
        "`from`/`to`, `from` not after `to`; `session`: `session_id`) and a reason that is "
        "not all blanks",
    },
    "teampath": {
        **LOG,
        "/v1/receipts$": "a signed receipt that verifies",
        "/v1/approvals$": "a signed suspended receipt",
        "/v1/approvals/[^/]+/token$": "a signed approval token",
    },
}
POSITIVE_REFUSALS = [*range(200, 300), 400, 401, 403, 404, 409, 422, 429]
# A body larger than the route takes (413) is a refusal too.
NEGATIVE_REFUSALS = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]


def fuzz_config(profile: str) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "checks": {"negative_data_rejection": {"expected-statuses": NEGATIVE_REFUSALS}},
            "operations": [
                {
                    "include-path-regex": f"^{path}",
                    "checks": {
                        "positive_data_acceptance": {"expected-statuses": POSITIVE_REFUSALS}
                    },
                }
                for path in DATA_DEPENDENT[profile]
            ],
            "generation": {
                "mode": "all",
                "max-examples": 25,
                "deterministic": True,
                "database": "none",
                "with-security-parameters": False,
            },
            # The examples phase has nothing to use (the documents carry no examples); the
            # stateful phase would chain operations past the suite's time budget.
            "phases": {"stateful": {"enabled": False}},
        }
    )


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    missing_required_header,
    unsupported_method,
    allow_header_conformance,
    ignored_auth,
]
# POLICY (deployed for acme) makes the policy routes answer a real bundle, rules rendered.
CSRF_SECRET = "f" * 32

keyscoped = schemathesis.openapi.from_dict(
    profile_document("keyscoped"), config=fuzz_config("keyscoped")
)
teampath = schemathesis.openapi.from_dict(
    profile_document("teampath"), config=fuzz_config("teampath")
)
# The checks' own probes (a request without the credential, an unlisted method) go to the
# same in-process handler as the cases.
keyscoped.app = teampath.app = WSGIHandler()


def _plain(value: object) -> bool:
    """Within the rules every JSON body is held to: no U+0000, integers in range."""
    if isinstance(value, dict):
        return all("\0" not in name and _plain(item) for name, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, str):
        return "\0" not in value
    if isinstance(value, int) and not isinstance(value, bool):
        return INTEGER_MIN <= value <= INTEGER_MAX
    return True


def filter_body(context: object, body: object) -> bool:
    """Bodies within the rules of every JSON body (no U+0000 in a string or name, integers
    from -2^63 to 2^64-1): the documents' description states them, as a JSON Schema cannot
    of free-form members. Out of them, a body is refused whatever its schema says."""
    return _plain(body)


keyscoped.hook(filter_body)
teampath.hook(filter_body)


def loopback_only(host: object, port: object, *args: object, **kwargs: object) -> list[Any]:
    """Every webhook host "resolves" to loopback: the fuzz never asks a real resolver."""
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


@pytest.fixture
def wsgi_app() -> Iterator[WSGIHandler]:
    """Django's WSGI handler (the schemas' app), run inside the test's transaction.

    As Django's own test client does, the request signals must not close the connection
    (that would end the transaction the test runs in).
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield keyscoped.app
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def loopback_webhooks(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Webhook URLs are checked by resolving their host: here every host is loopback, and
    loopback is allowed, so the fuzz reaches the endpoints' answers and no DNS query leaves."""
    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = True
    monkeypatch.setattr("apps.events.destinations.socket.getaddrinfo", loopback_only)


@pytest.fixture
def credentials(cast: Any) -> dict[str, dict[str, str]]:
    """The headers each security scheme needs, from the fixed cast (org acme)."""
    policy_deploy(org=cast.acme, toml=POLICY)
    key = api_key_issue(org=cast.acme, scopes=list(Scope), label="fuzz").secret
    owner = get_user_model().objects.get(username="acme-owner")
    jwt = console_tokens_issue(user=owner, org_slug="acme").access
    console = Client()
    console.force_login(owner)
    session = console.cookies["sessionid"].value
    activate_default()
    return {
        "ApiKeyHeader": {"x-api-key": key},
        "ApiKeyBearer": {"Authorization": f"Bearer {key}"},
        "BearerApiKey": {"Authorization": f"Bearer {key}"},
        "SessionJwt": {"Authorization": f"Bearer {jwt}"},
        "cookieAuth": {
            "Cookie": f"sessionid={session}; csrftoken={CSRF_SECRET}",
            "X-CSRFToken": CSRF_SECRET,
        },
    }


def headers_for(case: schemathesis.Case, credentials: dict[str, dict[str, str]]) -> dict[str, str]:
    """The first listed alternative of the operation's security (none for open routes)."""
    for requirement in case.operation.definition.raw.get("security", []):
        for scheme in requirement:
            return credentials[scheme]
    return {}


def aim_at_the_cast(case: schemathesis.Case) -> None:
    """Half of the generated team ids become the key's own team, so the fuzz reaches the
    answers behind the 404 too (deterministically: by the generated value's checksum)."""
    parameters = case.path_parameters or {}
    if "team_id" in parameters and zlib.crc32(repr(parameters["team_id"]).encode()) % 2:
        parameters["team_id"] = "acme"


def run(case: schemathesis.Case, credentials: dict[str, dict[str, str]]) -> None:
    aim_at_the_cast(case)
    case.call_and_validate(headers=headers_for(case, credentials), checks=CHECKS)


# The fixtures (database, cast, handler) are deliberately shared by an operation's examples.
SHARED_FIXTURES = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.urls("config.urls.keyscoped")
@pytest.mark.django_db
@keyscoped.parametrize()
@SHARED_FIXTURES
def test_the_key_scoped_profile_answers_as_documented(
    case, wsgi_app, credentials, loopback_webhooks
):
    run(case, credentials)


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.django_db
@teampath.parametrize()
@SHARED_FIXTURES
def test_the_team_path_profile_answers_as_documented(case, wsgi_app, credentials, settings):
    settings.API_PROFILE = "teampath"  # answers built outside DRF follow the profile
    run(case, credentials)
