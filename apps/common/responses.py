"""Error responses built outside DRF (middleware, plain views) in the active profile's body.

The profile is the deployment's ``API_PROFILE``: key-scoped bodies are ``{"detail": ...}``,
team-path bodies ``{"error": <code>, "message": ...}``, the same shapes as
``apps.common.api`` and ``apps.common.views`` produce.
"""

from __future__ import annotations

from http import HTTPStatus

from django.conf import settings
from django.http import JsonResponse


def error_response(*, status: HTTPStatus, code: str, message: str) -> JsonResponse:
    if settings.API_PROFILE == "teampath":
        return JsonResponse({"error": code, "message": message}, status=status)
    return JsonResponse({"detail": message}, status=status)
