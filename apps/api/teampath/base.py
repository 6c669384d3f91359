"""The team-path profile's base API class, authentication and its one error contract.

Every non-2xx body on this profile is ``{"error": "<snake_case code>", "message": "<text>"}``
(docs/teampath-errors.md lists the codes, generated from the error classes), produced
here for domain errors and DRF's own exceptions alike; middleware, probes, unrouted paths
and 500s answer the same shape through ``apps.common.responses``. Credentials are
``Authorization: Bearer <API key>`` only.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from django.http import Http404
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.authentication import ApiKeyAuthentication, ApiKeyPrincipal, presented_bearer
from apps.api.base import ExceptionHandler, RateLimitedApi, flatten_validation
from apps.api.throttles import OrgRateThrottle
from apps.common.capacity import TRANSIENT_DATABASE_ERRORS
from apps.common.errors import DomainError, NotFound
from apps.common.responses import teampath_body
from apps.tenancy.models import Org

logger = logging.getLogger(__name__)


class TeamNotFound(NotFound):
    """The path names a team that is not the key's own, or no team at all (one answer)."""

    code = "team_not_found"


# DRF's exceptions, by class: (status, code). Checked in order, first match wins.
_DRF_ERRORS: tuple[tuple[type[exceptions.APIException], HTTPStatus, str], ...] = (
    (exceptions.NotAuthenticated, HTTPStatus.UNAUTHORIZED, "unauthorized"),
    (exceptions.AuthenticationFailed, HTTPStatus.UNAUTHORIZED, "unauthorized"),
    (exceptions.PermissionDenied, HTTPStatus.FORBIDDEN, "forbidden"),
    (exceptions.ParseError, HTTPStatus.BAD_REQUEST, "invalid_json"),
    (exceptions.UnsupportedMediaType, HTTPStatus.BAD_REQUEST, "invalid_json"),
    (exceptions.ValidationError, HTTPStatus.BAD_REQUEST, "validation_failed"),
    (exceptions.NotFound, HTTPStatus.NOT_FOUND, "not_found"),
    (exceptions.MethodNotAllowed, HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed"),
    (exceptions.NotAcceptable, HTTPStatus.NOT_ACCEPTABLE, "not_acceptable"),
    (exceptions.Throttled, HTTPStatus.TOO_MANY_REQUESTS, "rate_limited"),
)


def _drf_status_and_code(exc: exceptions.APIException) -> tuple[HTTPStatus, str]:
    for kind, status, code in _DRF_ERRORS:
        if isinstance(exc, kind):
            return status, code
    return HTTPStatus(exc.status_code), str(exc.default_code)


def teampath_status(error: DomainError | type[DomainError]) -> HTTPStatus:
    """The HTTP status of a domain error (or its class) on the team-path profile."""
    return error.teampath_status or error.status


def domain_error_response(error: DomainError, **extras: object) -> Response:
    """A domain error in the team-path body, with ``Retry-After`` where waiting helps."""
    body = teampath_body(error.code, error.message, **extras)
    response = Response(body, status=teampath_status(error))
    retry_after = error.retry_after()
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def teampath_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Team-path error contract: every non-2xx body is ``{"error", "message"}``.

    Unknown exceptions return None so DRF re-raises them: they stay 500 (answered by
    ``teampath_server_error``) and are logged. Transient database errors are re-raised too:
    ``DatabaseUnavailableMiddleware`` answers them 503 with ``Retry-After``.
    """
    if isinstance(exc, TRANSIENT_DATABASE_ERRORS):
        return None
    if isinstance(exc, DomainError):
        return domain_error_response(exc)
    if isinstance(exc, Http404):
        return Response(teampath_body("not_found", "not found"), status=HTTPStatus.NOT_FOUND)
    if not isinstance(exc, exceptions.APIException):
        return None
    status, code = _drf_status_and_code(exc)
    if isinstance(exc, exceptions.ValidationError):
        message = flatten_validation(exc.detail)
    elif isinstance(exc, exceptions.ParseError):
        message = f"invalid JSON body: {exc.detail}"
    else:
        message = str(exc.detail)
    response = Response(teampath_body(code, message), status=status)
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        response["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if isinstance(exc, exceptions.Throttled):
        response["Retry-After"] = str(max(1, int(wait or 1)))
    return response


class BearerApiKeyAuthentication(ApiKeyAuthentication):
    """``Authorization: Bearer <API key>`` only: an ``x-api-key`` header is not looked at.

    Matching a key also activates its org's row-level-security context, and a failure
    counts against the client's address, as on the key-scoped profile.
    """

    def presented_key(self, request: Request) -> str | None:
        return presented_bearer(request)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="team-path"'


class TeamPathApi(RateLimitedApi):
    """Base for team-path endpoints: Bearer API key, ``{"error", "message"}`` errors, the
    org's rate limit (429 ``rate_limited`` with ``Retry-After``)."""

    authentication_classes = [BearerApiKeyAuthentication]
    throttle_classes = [OrgRateThrottle]

    def get_exception_handler(self) -> ExceptionHandler:
        return teampath_exception_handler


def team_of_key(principal: ApiKeyPrincipal, team_id: str) -> Org:
    """The key's org when ``team_id`` names it; anything else is ``team_not_found``.

    Another org's slug and an unknown one get the same answer, so no existence leaks.
    """
    org = principal.org
    if team_id != org.slug:
        raise TeamNotFound(f"no team {team_id!r} for this API key")
    return org
