"""What no profile base class sees, answered in the deployment's profile (``API_PROFILE``).

DRF's default exception handler covers the views without a profile base class (the
probes, the OpenAPI document), so a refusal there (a 405, a body that is not JSON) is in
the profile's body too; Django's error views answer unrouted paths, rejected hosts and
500s the same way. Unknown exceptions stay 500, as in both profiles.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from rest_framework.response import Response

from apps.api.keyscoped.base import keyscoped_exception_handler
from apps.api.teampath.base import teampath_exception_handler
from apps.common.capacity import database_unavailable_error_answer
from apps.common.responses import error_response


def profile_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if settings.API_PROFILE == "teampath":
        return teampath_exception_handler(exc, context)
    return keyscoped_exception_handler(exc, context)


def not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(status=HTTPStatus.NOT_FOUND, code="not_found", message="not found")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return error_response(status=HTTPStatus.BAD_REQUEST, code="bad_request", message="bad request")


def server_error(request: HttpRequest) -> JsonResponse:
    # A transient database error raised outside a view (a middleware's lazy read of the
    # session or user): the 503 every other database failure gets, logged once, not a
    # 500 that Django would log with its traceback on every answer.
    unavailable = database_unavailable_error_answer(request)
    if unavailable is not None:
        return unavailable
    return error_response(
        status=HTTPStatus.INTERNAL_SERVER_ERROR,
        code="internal_error",
        message="internal server error",
    )
