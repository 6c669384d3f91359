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

Both answers carry ``Retry-After: RETRY_AFTER_SECONDS``. A database outage is logged as
one WARNING line per answer; the traceback only with its first failure (see ``_Outage``).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponseBase, JsonResponse

from apps.common import metrics
from apps.common.errors import ServiceUnavailable
from apps.common.responses import error_response, logged_already

logger = logging.getLogger(__name__)

TRANSIENT_DATABASE_ERRORS = (OperationalError, InterfaceError)

# Probes and scrapes stay answerable when the process is saturated.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

# On the request: the transient database error it failed with (outside a view), and
# whether its 503 was answered (and logged) already.
_DATABASE_UNAVAILABLE = "_mirror_database_unavailable"
_ANSWERED = "_mirror_database_unavailable_answered"

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


class _Outage:
    """Whether this process is in a database outage, for its log: the first failure after
    the database last answered is logged with its traceback, every later answer of the
    same outage as one line (an outage answers hundreds of requests, each with the same
    traceback). The outage ends when a new connection opens (``connection_created``) or a
    request is answered on an open connection without a database error."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing = False

    def failure_begins_it(self) -> bool:
        with self._lock:
            first = not self._failing
            self._failing = True
        return first

    def end(self, **_: Any) -> None:
        self._failing = False


outage = _Outage()


# Enough of an error's message to name its cause (the host and port, the server's words).
_MESSAGE_CHARACTERS = 300


def _one_line(exception: BaseException) -> str:
    """The error's class and message on one line (psycopg's span several)."""
    message = " ".join(str(exception).split())
    name = type(exception).__name__
    return f"{name}: {message[:_MESSAGE_CHARACTERS]}" if message else name


def log_database_unavailable(what: str, exception: BaseException) -> None:
    """One WARNING line for a transient database error (``what`` happened); the traceback
    only with an outage's first failure."""
    first = outage.failure_begins_it()
    logger.warning(
        "%s: %s%s",
        what,
        _one_line(exception),
        " (first failure of this outage; its later ones are logged without a traceback)"
        if first
        else "",
        exc_info=exception if first else None,
    )


def database_unavailable_answer(request: HttpRequest, exception: BaseException) -> JsonResponse:
    """The 503 for a transient database error, logged once (``log_database_unavailable``)."""
    log_database_unavailable("database unavailable, answering 503", exception)
    setattr(request, _ANSWERED, True)
    return _database_unavailable_response()


def database_unavailable_error_answer(request: HttpRequest) -> JsonResponse | None:
    """For the 500 handler: the 503 when the request failed for a transient database error
    raised outside a view (a middleware's lazy read), where Django answers it itself."""
    exception = getattr(request, _DATABASE_UNAVAILABLE, None)
    if exception is None:
        return None
    return database_unavailable_answer(request, exception)


class DatabaseUnavailableMiddleware:
    """Transient database errors become 503 with ``Retry-After``; they are still logged."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if getattr(request, _ANSWERED, False):
            return response
        # An error raised by a middleware inside this one (not by a view) has already been
        # turned into a 500 by Django (and logged by it); mark_database_unavailable flagged
        # the request.
        exception = getattr(request, _DATABASE_UNAVAILABLE, None)
        if response.status_code == 500 and exception is not None:
            return database_unavailable_answer(request, exception)
        if connection.connection is not None and not connection.errors_occurred:
            outage.end()  # answered with the database at hand
        return response

    def process_exception(
        self, request: HttpRequest, exception: Exception
    ) -> HttpResponseBase | None:
        if not isinstance(exception, TRANSIENT_DATABASE_ERRORS):
            return None
        return database_unavailable_answer(request, exception)


def mark_database_unavailable(sender: Any, request: HttpRequest | None = None, **_: Any) -> None:
    """``got_request_exception`` receiver: Django calls it inside its ``except`` block."""
    error = sys.exc_info()[1]
    if request is not None and isinstance(error, TRANSIENT_DATABASE_ERRORS):
        setattr(request, _DATABASE_UNAVAILABLE, error)


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
