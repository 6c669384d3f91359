"""503 when the service is briefly at capacity, in the profile's error body, never a 500.

Two causes:

- the database is unreachable, refuses connections, or cancels a statement at
  ``statement_timeout`` (psycopg's ``QueryCanceled``): Django raises ``OperationalError``
  (or ``InterfaceError`` for a connection that died under it). DRF's exception handlers
  return None for these, so DRF re-raises them and ``DatabaseUnavailableMiddleware`` turns
  them into 503 for every route, the admin included. Atomic blocks have already rolled back
  by then: nothing half-written stays behind.
- more requests in flight in this process than ``MAX_CONCURRENT_REQUESTS``:
  ``ConcurrencyLimitMiddleware`` answers 503 at once instead of queueing.

Both answers carry ``Retry-After: RETRY_AFTER_SECONDS``.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from apps.common import metrics
from apps.common.errors import ServiceUnavailable
from apps.common.responses import error_response, logged_already

logger = logging.getLogger(__name__)

TRANSIENT_DATABASE_ERRORS = (OperationalError, InterfaceError)

# Probes and scrapes stay answerable when the process is saturated.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

_DATABASE_UNAVAILABLE = "_mirror_database_unavailable"

GetResponse = Callable[[HttpRequest], HttpResponseBase]


def unavailable_response(message: str) -> JsonResponse:
    response = error_response(
        status=ServiceUnavailable.status, code=ServiceUnavailable.code, message=message
    )
    response["Retry-After"] = str(settings.RETRY_AFTER_SECONDS)
    return logged_already(response)


def _database_unavailable_response() -> JsonResponse:
    metrics.over_capacity("database")
    return unavailable_response("the database is briefly unavailable; retry shortly")


class DatabaseUnavailableMiddleware:
    """Transient database errors become 503 with ``Retry-After``; they are still logged."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        # An error raised by a middleware inside this one (not by a view) has already been
        # turned into a 500 by Django; mark_database_unavailable flagged the request.
        if response.status_code == 500 and getattr(request, _DATABASE_UNAVAILABLE, False):
            return _database_unavailable_response()
        return response

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponseBase | None:
        if not isinstance(exception, TRANSIENT_DATABASE_ERRORS):
            return None
        logger.warning(
            "database unavailable, answering 503: %s",
            type(exception).__name__,
            exc_info=exception,
        )
        return _database_unavailable_response()


def mark_database_unavailable(sender: Any, request: HttpRequest | None = None, **_: Any) -> None:
    """``got_request_exception`` receiver: Django calls it inside its ``except`` block."""
    if request is not None and isinstance(sys.exc_info()[1], TRANSIENT_DATABASE_ERRORS):
        setattr(request, _DATABASE_UNAVAILABLE, True)


class ConcurrencyLimitMiddleware:
    """At most ``MAX_CONCURRENT_REQUESTS`` requests in flight per process; 0 turns it off.

    With gunicorn's sync workers a process serves one request at a time, so this matters
    with threaded workers: a saturated process answers 503 at once rather than queueing
    work it cannot start before the client gives up.
    """

    def __init__(self, get_response: GetResponse) -> None:
        limit: int = settings.MAX_CONCURRENT_REQUESTS
        if limit <= 0:
            raise MiddlewareNotUsed("MAX_CONCURRENT_REQUESTS is 0")
        self.get_response = get_response
        self._slots = threading.BoundedSemaphore(limit)

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path_info in EXEMPT_PATHS:
            return self.get_response(request)
        if not self._slots.acquire(blocking=False):
            metrics.over_capacity("concurrency")
            return unavailable_response("the server is at capacity; retry shortly")
        try:
            return self.get_response(request)
        finally:
            self._slots.release()
