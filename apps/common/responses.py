"""Error responses built outside DRF (middleware, plain views) in the active profile's body.

The profile is the deployment's ``API_PROFILE``: key-scoped bodies are ``{"detail": ...}``,
team-path bodies ``{"error": <code>, "message": ...}``, the same shapes as
``apps.common.api`` and ``apps.common.views`` produce.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TypeVar

from django.conf import settings
from django.http import HttpResponseBase, JsonResponse

R = TypeVar("R", bound=HttpResponseBase)


def error_response(*, status: HTTPStatus, code: str, message: str) -> JsonResponse:
    if settings.API_PROFILE == "teampath":
        return JsonResponse({"error": code, "message": message}, status=status)
    return JsonResponse({"detail": message}, status=status)


def logged_already(response: R) -> R:
    """Keep Django from logging this answer again at ERROR (it logs every 5xx).

    For an expected 503 whose cause was logged at WARNING, or that the access line records
    (over capacity), a second, louder line per request would only be noise under load.
    """
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response
