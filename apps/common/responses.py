"""The two profiles' error bodies, built here and nowhere else.

Key-scoped bodies are ``{"detail": <text>, ...}``, team-path bodies
``{"error": <code>, "message": <text>, ...}``. The profiles' exception handlers
(``apps.api``) put domain and DRF errors in them; middleware and plain views answer through
:func:`error_response`, which picks the deployment's profile (``API_PROFILE``).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TypeVar

from django.conf import settings
from django.http import HttpResponseBase, JsonResponse

R = TypeVar("R", bound=HttpResponseBase)


def keyscoped_body(message: str, **extras: object) -> dict[str, object]:
    return {"detail": message, **extras}


def teampath_body(code: str, message: str, **extras: object) -> dict[str, object]:
    return {"error": code, "message": message, **extras}


def error_response(*, status: HTTPStatus, code: str, message: str) -> JsonResponse:
    if settings.API_PROFILE == "teampath":
        return JsonResponse(teampath_body(code, message), status=status)
    return JsonResponse(keyscoped_body(message), status=status)


def profile_error_response(
    *, code: str, message: str, status: HTTPStatus, teampath_status: HTTPStatus | None = None
) -> JsonResponse:
    """A refusal answered outside DRF with the deployment's own mapping: on team-path its
    team-path status (``teampath_status`` where the profiles differ, as
    ``DomainError.teampath_status``) and body, on key-scoped the key-scoped status and
    ``{"detail"}`` body. The key-scoped body also carries ``error`` and ``message``: a
    console page's script reads those two on either profile."""
    if settings.API_PROFILE == "teampath":
        return JsonResponse(teampath_body(code, message), status=teampath_status or status)
    body = {**keyscoped_body(message), "error": code, "message": message}
    return JsonResponse(body, status=status)


def logged_already(response: R) -> R:
    """Keep Django from logging this answer again at ERROR (it logs every 5xx).

    For an expected 503 whose cause was logged at WARNING, or that the access line records
    (over capacity), a second, louder line per request would only be noise under load.
    """
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response
