"""Request ids and one JSON access-log line per request (the formatter: json_logging).

Every request gets an id: the caller's ``X-Request-ID`` when it is sane (at most 128
characters of ``[A-Za-z0-9._-]``, so it can go into logs and headers as is), otherwise a
fresh uuid4 hex. The id is echoed in the response and held in a context variable for the
duration of the request, so every log line written meanwhile carries it.

The access line names the route (the URL pattern's name, never the raw path with ids in
it), never a header, a credential or the body.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.utils.functional import SimpleLazyObject

from apps.common import metrics
from apps.common.json_logging import bind_request_id

REQUEST_ID_HEADER = "X-Request-ID"
ACCESS_LOGGER = "mirror.access"

_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")

access_logger = logging.getLogger(ACCESS_LOGGER)


def accepted_request_id(presented: str | None) -> str:
    """The caller's id if it is sane, otherwise a new one."""
    if presented and _SANE_REQUEST_ID.fullmatch(presented):
        return presented
    return uuid.uuid4().hex


def route_name(request: HttpRequest) -> str:
    """The URL pattern's name (``receipt-push``), its route when unnamed, else ``unmatched``."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return metrics.UNMATCHED_ROUTE
    return match.url_name or match.route or metrics.UNMATCHED_ROUTE


def principal_org_slug(request: HttpRequest) -> str | None:
    """The org of the request's DRF principal (API key or console session), if one was set.

    DRF assigns its principal to the Django request too. Until then ``request.user`` is
    Django's lazy session user: never evaluated here (it would cost a query) and it has
    no org anyway.
    """
    user = request.__dict__.get("user")
    if user is None or isinstance(user, SimpleLazyObject):
        return None
    try:
        slug = getattr(getattr(user, "org", None), "slug", None)
    except Exception:  # a log line must never fail the request it describes
        return None
    return slug if isinstance(slug, str) else None


class RequestLogMiddleware:
    """Outermost middleware: request id in and out, one access line, request metrics."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = accepted_request_id(request.META.get("HTTP_X_REQUEST_ID"))
        bind_request_id(request_id)
        started = time.perf_counter()
        status = 500
        try:
            response = self.get_response(request)
            status = response.status_code
            response[REQUEST_ID_HEADER] = request_id
            return response
        finally:
            self._record(request, status, time.perf_counter() - started)

    def _record(self, request: HttpRequest, status: int, duration: float) -> None:
        route = route_name(request)
        method = request.method or ""
        metrics.observe_request(
            route=route, method=method, status=status, duration_seconds=duration
        )
        fields: dict[str, Any] = {
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(duration * 1000, 2),
        }
        org = principal_org_slug(request)
        if org is not None:
            fields["org"] = org
        access_logger.info("%s %s %s", method, route, status, extra=fields)
