"""The team-path error contract: ``{"error", "message"}`` on every non-2xx answer."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.test import Client
from rest_framework import exceptions

from apps.api.teampath.base import teampath_exception_handler
from apps.common.errors import ServiceUnavailable
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH


def test_an_unrouted_path_is_404_not_found(acme):
    assert_error(acme.get("/v1/nothing-here"), HTTPStatus.NOT_FOUND, "not_found")


def test_key_scoped_routes_do_not_exist_on_this_profile(acme):
    assert_error(acme.get("/v1/policy/pull"), HTTPStatus.NOT_FOUND, "not_found")
    assert_error(acme.get("/v1/audit/chain"), HTTPStatus.NOT_FOUND, "not_found")


def test_a_wrong_method_is_405_method_not_allowed(acme):
    assert_error(acme.get("/v1/receipts"), HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed")
    assert_error(
        acme.get("/v1/receipts/batch"), HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed"
    )


def test_an_unhandled_exception_is_500_internal_error_in_the_body(cast, monkeypatch):
    from apps.approvals.services import intake

    def explode(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(intake, "receipt_append", explode)
    response = Client(raise_request_exception=False).post(
        "/v1/receipts",
        as_text(Agent().receipt()),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {cast.acme_key.secret}",
    )
    assert_error(response, HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error")


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (exceptions.NotAuthenticated(), HTTPStatus.UNAUTHORIZED, "unauthorized"),
        (exceptions.AuthenticationFailed(), HTTPStatus.UNAUTHORIZED, "unauthorized"),
        (exceptions.PermissionDenied(), HTTPStatus.FORBIDDEN, "forbidden"),
        (exceptions.ParseError(), HTTPStatus.BAD_REQUEST, "invalid_json"),
        (exceptions.UnsupportedMediaType("text/plain"), HTTPStatus.BAD_REQUEST, "invalid_json"),
        (exceptions.ValidationError({"a": ["b"]}), HTTPStatus.BAD_REQUEST, "validation_failed"),
        (exceptions.NotFound(), HTTPStatus.NOT_FOUND, "not_found"),
        (exceptions.MethodNotAllowed("PUT"), HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed"),
        (exceptions.Throttled(wait=12), HTTPStatus.TOO_MANY_REQUESTS, "rate_limited"),
        (ServiceUnavailable("busy"), HTTPStatus.SERVICE_UNAVAILABLE, "over_capacity"),
    ],
)
def test_drf_and_domain_errors_map_to_the_catalogue(exc, status, code):
    response = teampath_exception_handler(exc, {})
    assert response is not None
    assert response.status_code == status
    assert response.data["error"] == code
    assert isinstance(response.data["message"], str)


def test_validation_errors_read_as_one_sentence():
    response = teampath_exception_handler(exceptions.ValidationError({"token": ["required"]}), {})
    assert response is not None
    assert response.data == {"error": "validation_failed", "message": "token: required"}


def test_rate_limited_and_over_capacity_carry_retry_after(settings):
    throttled = teampath_exception_handler(exceptions.Throttled(wait=12), {})
    assert throttled is not None
    assert throttled["Retry-After"] == "12"
    busy = teampath_exception_handler(ServiceUnavailable("busy"), {})
    assert busy is not None
    assert busy["Retry-After"] == str(settings.RETRY_AFTER_SECONDS)


def test_unknown_exceptions_are_left_to_become_logged_500s():
    assert teampath_exception_handler(RuntimeError("boom"), {}) is None
