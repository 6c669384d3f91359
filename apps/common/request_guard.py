"""Refusals of a request as a whole, before any view, session or credential lookup reads it.

Hostile input must get a 4xx, never a 500 and never a log record at ERROR. These
are the refusals that do not depend on the route's own body rules (``apps.common.json_body``):

* U+0000 (NUL) in the path, the query string (``%00``) or a header value: nothing this
  service stores or looks up can hold it (PostgreSQL ``text`` cannot), so it is a
  validation error wherever it appears, never a database driver's 500;
* a ``Host`` not in ``ALLOWED_HOSTS``, more query parameters (or form fields, or files)
  than Django parses: Django would answer these 400 too, but with its HTML page and a
  traceback logged at ERROR on ``django.security.*`` for every such request;
* a declared ``Content-Length`` above ``JSON_BODY_MAX_BYTES``: 413 before a byte is read
  (Django's own ``RequestDataTooBig`` is the same HTML 400 logged at ERROR);
* a POST, PUT or PATCH that says its body is JSON and sends none: refused as not JSON. DRF
  never hands an empty body to a parser (it reads it as ``{}``);
* a form body (urlencoded or multipart) sent to a JSON route: refused here, before a CSRF
  check (session authentication, the console's vote endpoint) parses it as a form; other
  types that are not JSON reach the route, whose parser refuses them after authentication.
  Form bodies sent to pages are parsed here once, so a malformed one (too many fields or
  files, a bad multipart boundary) is refused before the CSRF check meets it.

Each refusal is answered in the error body of what the path routes to: the deployment
profile's (``apps.common.responses``; a validation error is key-scoped 422, team-path 400)
for its API routes and unrouted paths, ``{"error", "message"}`` for the console's JSON
endpoints (views marked with ``answers_json``), a plain-text 400/413 for pages (the admin
console, the approver and verifier pages).
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import DisallowedHost, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import Resolver404, ResolverMatch, resolve

from apps.common.json_body import declared_length, is_json_media_type
from apps.common.responses import error_response

GetResponse = Callable[[HttpRequest], HttpResponseBase]
View = TypeVar("View", bound=Callable[..., Any])

_NUL = "\x00"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})
# Bad input the key-scoped profile answers 422 (its status for a body or parameter that fails
# validation); a bad Host or an unparseable request is 400 on both profiles.
_KEYSCOPED_422 = frozenset({"validation_failed", "invalid_json"})


def answers_json(view: View) -> View:
    """Marks a console view whose answers are JSON ``{"error", "message"}`` (and whose body is
    JSON), so the guard's refusals reach it in that shape too."""
    view.answers_json = True  # type: ignore[attr-defined]
    return view


class _Refusal(Exception):
    def __init__(self, status: HTTPStatus, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _nul_in(request: HttpRequest) -> str | None:
    """Where the request carries a NUL, or None."""
    if _NUL in request.path:
        return "the path"
    query = request.META.get("QUERY_STRING", "")
    if _NUL in query or "%00" in query:
        return "the query string"
    for name, value in request.META.items():
        if (name.startswith("HTTP_") or name == "CONTENT_TYPE") and _NUL in str(value):
            return "a header"
    return None


def _route(request: HttpRequest) -> ResolverMatch | None:
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    request.resolver_match = match  # the access line names the route, as for any answer
    return match


def _kind(match: ResolverMatch | None) -> str:
    """``api`` (a DRF view, or no route: the profile's 404), ``console-json`` or ``page``."""
    if match is None:
        return "api"
    if getattr(match.func, "answers_json", False):
        return "console-json"
    return "api" if hasattr(match.func, "cls") else "page"  # DRF's as_view() sets ``cls``


def _check(request: HttpRequest) -> None:
    """Raise ``_Refusal`` for the first problem of the request as a whole (module docstring)."""
    where = _nul_in(request)
    if where is not None:
        raise _Refusal(
            HTTPStatus.BAD_REQUEST, "validation_failed", f"U+0000 (NUL) is not allowed in {where}"
        )
    try:
        request.get_host()
        request.GET  # noqa: B018 (parsed here, within DATA_UPLOAD_MAX_NUMBER_FIELDS)
    except DisallowedHost:
        raise _Refusal(HTTPStatus.BAD_REQUEST, "bad_request", "host not allowed") from None
    except SuspiciousOperation as error:
        raise _Refusal(HTTPStatus.BAD_REQUEST, "bad_request", str(error)) from None
    limit: int = settings.JSON_BODY_MAX_BYTES
    declared = declared_length(request.META)
    if declared > limit:
        raise _Refusal(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "payload_too_large",
            f"request body larger than {limit} bytes",
        )
    if request.method not in _BODY_METHODS:
        return
    content_type = request.META.get("CONTENT_TYPE", "")
    if is_json_media_type(content_type):
        if declared == 0:
            raise _Refusal(
                HTTPStatus.BAD_REQUEST, "invalid_json", "invalid JSON body: the body is empty"
            )
        return
    if declared == 0 or request.content_type not in _FORM_TYPES:
        return  # no body, or one no CSRF check parses: the view and its parser decide
    match = _route(request)
    kind = _kind(match)
    if kind == "page":
        if request.method == "POST":
            try:
                request.POST  # noqa: B018 (parsed once here, as the CSRF check would)
            except (SuspiciousOperation, MultiPartParserError) as error:
                raise _Refusal(HTTPStatus.BAD_REQUEST, "bad_request", str(error)) from None
        return
    # A DRF route without a handler for the method answers 405, an unrouted path 404.
    handles = match is not None and (
        kind == "console-json" or hasattr(getattr(match.func, "cls", None), request.method.lower())
    )
    if handles:
        raise _Refusal(
            HTTPStatus.BAD_REQUEST,
            "invalid_json",
            f"expected Content-Type application/json, got {request.content_type}",
        )


class RequestGuardMiddleware:
    """See the module docstring."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        try:
            _check(request)
        except _Refusal as refusal:
            return self.refuse(request, refusal)
        return self.get_response(request)

    @staticmethod
    def refuse(request: HttpRequest, refusal: _Refusal) -> HttpResponse:
        kind = _kind(getattr(request, "resolver_match", None) or _route(request))
        status, code, message = refusal.status, refusal.code, refusal.message
        if kind == "console-json":
            return JsonResponse({"error": code, "message": message}, status=status)
        if kind == "page":
            return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
        if code in _KEYSCOPED_422 and settings.API_PROFILE != "teampath":
            status = HTTPStatus.UNPROCESSABLE_ENTITY  # the key-scoped status of bad input
        return error_response(status=status, code=code, message=message)
