"""Base API classes: each profile fixes its authentication and its error contract here."""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

from apps.common.capacity import TRANSIENT_DATABASE_ERRORS
from apps.common.errors import DomainError, ServiceUnavailable
from apps.tenancy.authentication import ApiKeyAuthentication, ConsoleJwtAuthentication
from apps.tenancy.limits import (
    DashboardRateThrottle,
    OrgRateThrottle,
    rate_limit_decision,
    rate_limit_headers,
)

logger = logging.getLogger(__name__)

ExceptionHandler = Callable[[Exception, dict[str, Any]], Response | None]


def _flatten_validation(detail: Any) -> str:
    """One readable sentence from DRF's nested validation errors."""
    if isinstance(detail, dict):
        return "; ".join(
            f"{field}: {_flatten_validation(value)}" for field, value in detail.items()
        )
    if isinstance(detail, list):
        return "; ".join(_flatten_validation(item) for item in detail)
    return str(detail)


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
        response = Response({"detail": exc.message, **exc.body_extras()}, status=exc.status)
        if isinstance(exc, ServiceUnavailable):
            response["Retry-After"] = str(settings.RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {"detail": f"invalid JSON body: {exc.detail}"}, status=HTTPStatus.UNPROCESSABLE_ENTITY
        )
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return Response({"detail": str(exc.detail)}, status=HTTPStatus.UNPROCESSABLE_ENTITY)
    if isinstance(exc, exceptions.ValidationError):
        return Response(
            {"detail": _flatten_validation(exc.detail)}, status=HTTPStatus.UNPROCESSABLE_ENTITY
        )
    return exception_handler(exc, context)


class RateLimitedApi(APIView):
    """Takes the rate-limit decision right after authentication, before permissions (DRF's
    own order is the reverse), and adds its ``RateLimit-*`` headers to every response,
    errors included: an authenticated request refused for its scope or role still counts
    and still says what remains. Before authentication there is no bucket and no header."""

    def perform_authentication(self, request: Request) -> None:
        super().perform_authentication(request)
        super().check_throttles(request)

    def check_throttles(self, request: Request) -> None:
        """Done in :meth:`perform_authentication` already (``initial`` calls this after
        the permissions): a second call would take a second token."""

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        decision = rate_limit_decision(request)
        if decision is not None:
            for name, value in rate_limit_headers(decision).items():
                response[name] = value
        return response


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
