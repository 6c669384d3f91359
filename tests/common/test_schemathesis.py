"""Schemathesis fuzzes both profiles through WSGI against their own OpenAPI documents.

For every operation of each profile's document: 25 deterministic examples (positive and
negative), sent in-process to Django's WSGI handler inside the test's database
transaction, with the fixed cast's credentials injected for the operation's security
scheme. Every answer must not be a 5xx, must use a documented status code and content
type, and must match the documented response schema.
"""

from __future__ import annotations

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
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from apps.common.openapi import profile_document
from apps.policy.services import policy_deploy
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import Scope
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import api_key_issue
from tests.policy.test_teampath_policy_api import POLICY

FUZZ_CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {
            "mode": "all",
            "max-examples": 25,
            "deterministic": True,
            "database": "none",
            "with-security-parameters": False,
        },
        # The examples phase has nothing to use (the documents carry no examples); coverage
        # would multiply the cases past the suite's time budget.
        "phases": {"coverage": {"enabled": False}, "stateful": {"enabled": False}},
    }
)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# POLICY (deployed for acme) makes the policy routes answer a real bundle, rules rendered.
CSRF_SECRET = "f" * 32

keyscoped = schemathesis.openapi.from_dict(profile_document("keyscoped"), config=FUZZ_CONFIG)
teampath = schemathesis.openapi.from_dict(profile_document("teampath"), config=FUZZ_CONFIG)


@pytest.fixture
def wsgi_app() -> Iterator[WSGIHandler]:
    """Django's WSGI handler, run inside the test's transaction.

    As Django's own test client does, the request signals must not close the connection
    (that would end the transaction the test runs in).
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield WSGIHandler()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


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


def run(case: schemathesis.Case, app: WSGIHandler, credentials: dict[str, dict[str, str]]) -> None:
    aim_at_the_cast(case)
    case.call_and_validate(app=app, headers=headers_for(case, credentials), checks=CHECKS)


# The fixtures (database, cast, handler) are deliberately shared by an operation's examples.
SHARED_FIXTURES = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.urls("config.urls.keyscoped")
@pytest.mark.django_db
@keyscoped.parametrize()
@SHARED_FIXTURES
def test_the_key_scoped_profile_answers_as_documented(case, wsgi_app, credentials):
    run(case, wsgi_app, credentials)


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.django_db
@teampath.parametrize()
@SHARED_FIXTURES
def test_the_team_path_profile_answers_as_documented(case, wsgi_app, credentials, settings):
    settings.API_PROFILE = "teampath"  # answers built outside DRF follow the profile
    run(case, wsgi_app, credentials)
