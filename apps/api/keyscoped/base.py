"""The key-scoped profile's base API classes and its one error contract.

Every non-2xx body on this profile is ``{"detail": "<text>"}`` (plus a domain error's own
members, such as a refused receipt's verdict ``kind``), produced by
:func:`keyscoped_exception_handler` for API views; middleware, probes and unrouted paths
answer the same shape through ``apps.common.responses``.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from apps.api.authentication import ApiKeyAuthentication, ConsoleJwtAuthentication
from apps.api.base import ExceptionHandler, RateLimitedApi, flatten_validation
from apps.api.throttles import DashboardRateThrottle, OrgRateThrottle
from apps.common.capacity import TRANSIENT_DATABASE_ERRORS
from apps.common.errors import DomainError
from apps.common.responses import keyscoped_body


def keyscoped_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Key-scoped error contract: every non-2xx body is ``{"detail": ...}``.

    Body schema failures are 422 (the profile's rule), including JSON that does not parse.
    Unknown exceptions return None so DRF re-raises them: they stay 500 and are logged.
    Transient database errors are re-raised too: ``DatabaseUnavailableMiddleware`` answers
    them 503 with ``Retry-After`` on every route.
    """
    if isinstance(exc, TRANSIENT_DATABASE_ERRORS):
        return None
    if isinstance(exc, DomainError):
        response = Response(keyscoped_body(exc.message, **exc.body_extras()), status=exc.status)
        retry_after = exc.retry_after()
        if retry_after is not None:
            response["Retry-After"] = str(retry_after)
        return response
    if isinstance(exc, exceptions.ParseError):
        message = f"invalid JSON body: {exc.detail}"
        return Response(keyscoped_body(message), status=HTTPStatus.UNPROCESSABLE_ENTITY)
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return Response(keyscoped_body(str(exc.detail)), status=HTTPStatus.UNPROCESSABLE_ENTITY)
    if isinstance(exc, exceptions.ValidationError):
        message = flatten_validation(exc.detail)
        return Response(keyscoped_body(message), status=HTTPStatus.UNPROCESSABLE_ENTITY)
    return exception_handler(exc, context)


class KeyScopedSdkApi(RateLimitedApi):
    """Base for key-scoped SDK-plane endpoints: API key auth, ``{"detail"}`` errors,
    the org's rate limit."""

    authentication_classes = [ApiKeyAuthentication]
    throttle_classes = [OrgRateThrottle]

    def get_exception_handler(self) -> ExceptionHandler:
        return keyscoped_exception_handler


class DashboardApi(RateLimitedApi):
    """Base for dashboard-plane endpoints: console session JWT, ``{"detail"}`` errors,
    a rate limit per console user."""

    authentication_classes = [ConsoleJwtAuthentication]
    throttle_classes = [DashboardRateThrottle]

    def get_exception_handler(self) -> ExceptionHandler:
        return keyscoped_exception_handler
