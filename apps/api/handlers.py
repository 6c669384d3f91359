"""What no profile base class sees, answered in the deployment's profile (``API_PROFILE``).

DRF's default exception handler covers the views without a profile base class (the
probes, the OpenAPI document), so a refusal there (a 405, a body that is not JSON) is in
the profile's body too; Django's error views answer unrouted API paths, rejected hosts and
500s the same way (an unrouted page path gets a page leading to the console). Unknown
exceptions stay 500, as in both profiles.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve
from rest_framework.response import Response

from apps.api.keyscoped.base import keyscoped_exception_handler
from apps.api.teampath.base import teampath_exception_handler
from apps.common.capacity import database_unavailable_error_answer
from apps.common.responses import error_response


def profile_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if settings.API_PROFILE == "teampath":
        return teampath_exception_handler(exc, context)
    return keyscoped_exception_handler(exc, context)


# Paths that machines read (the API, the probes, the metrics scrape): their 404 is the
# profile's error body, never a page.
MACHINE_PATHS = ("/v1", "/healthz", "/readyz", "/metrics")


def is_api_path(path: str) -> bool:
    return path in MACHINE_PATHS or path.startswith("/v1/")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """An API path answers the profile's error body; any other, a page leading to the
    console, the API docs and the verifier (a person mistyped it)."""
    if is_api_path(request.path_info):
        return error_response(status=HTTPStatus.NOT_FOUND, code="not_found", message="not found")
    return render(request, "console/not_found.html", status=HTTPStatus.NOT_FOUND)


class DebugNotFoundMiddleware:
    """With DEBUG on, answer a 404 as production does (:func:`not_found`).

    Django never calls ``handler404`` under DEBUG: it shows its technical page, which lists
    every URL pattern and answers HTML on API paths too. This answers an unrouted path, and
    an ``Http404`` a view raises, with the same page or error body as production; without
    DEBUG it removes itself (``MiddlewareNotUsed``) and ``handler404`` does the work.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.DEBUG:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            resolve(request.path_info, getattr(request, "urlconf", None))
        except Resolver404:
            return not_found(request)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return not_found(request, exception) if isinstance(exception, Http404) else None


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
