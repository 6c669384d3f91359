"""What both profiles' base API classes share: the rate-limit step and the one sentence a
validation error becomes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.throttles import rate_limit_decision, rate_limit_headers

ExceptionHandler = Callable[[Exception, dict[str, Any]], Response | None]


def flatten_validation(detail: Any) -> str:
    """One readable sentence from DRF's nested validation errors."""
    if isinstance(detail, dict):
        return "; ".join(f"{field}: {flatten_validation(value)}" for field, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(flatten_validation(item) for item in detail)
    return str(detail)


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
