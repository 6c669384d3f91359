"""Prometheus metrics: the counters, the helpers services call, and the ``/metrics`` view.

Exposition is off unless ``METRICS_ENABLED`` (the route then answers 404 like any unknown
path) and is limited to ``METRICS_ALLOWED_IPS``. Counting itself always runs: it is a few
dictionary lookups and keeps the helpers free of settings checks.

Under gunicorn each worker is its own process with its own counters. With
``PROMETHEUS_MULTIPROC_DIR`` set in the environment before start-up, prometheus-client
writes every worker's values to files in that directory and ``/metrics`` sums them;
``deploy/gunicorn.conf.py`` empties the directory at start and marks exited workers dead.
"""

from __future__ import annotations

import ipaddress
import os
from functools import lru_cache
from http import HTTPStatus

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

from apps.common.responses import error_response

# prometheus-client writes into this directory as soon as a metric exists; a management
# command run before gunicorn created it (migrate in the systemd unit) must not fail.
if _multiproc_dir := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.makedirs(_multiproc_dir, exist_ok=True)

RECEIPT_PUSH_ROUTE = "receipt-push"
UNMATCHED_ROUTE = "unmatched"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

HTTP_REQUESTS = Counter(
    "mirror_http_requests",
    "HTTP requests answered, by URL pattern name, method and status.",
    ["route", "method", "status"],
)
RECEIPT_PUSH_SECONDS = Histogram(
    "mirror_receipt_push_duration_seconds",
    "Time to answer POST /v1/receipts (receipt-push), whatever the answer.",
    buckets=(0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
RECEIPTS_APPENDED = Counter(
    "mirror_receipts_appended",
    "Receipts appended to an org's mirror chain, by API profile.",
    ["profile"],
)
RECEIPTS_REFUSED = Counter(
    "mirror_receipts_refused",
    "Receipts refused, by verdict or refusal kind.",
    ["kind"],
)
APPROVAL_TRANSITIONS = Counter(
    "mirror_approval_transitions",
    "Approval state transitions, by the status entered.",
    ["to_status"],
)
RATE_LIMIT_HITS = Counter(
    "mirror_rate_limit_hits",
    "Requests answered 429, by plane.",
    ["plane"],
)
OVER_CAPACITY = Counter(
    "mirror_over_capacity",
    "Requests answered 503 because the service was briefly at capacity, by reason.",
    ["reason"],
)


def _label(value: object) -> str:
    # Label values come from code (enums, verdict kinds), but a label is a time series:
    # bound the length so a mistake cannot explode cardinality with long strings.
    return str(value)[:64]


def receipts_appended(profile: str, count: int = 1) -> None:
    """Call after a receipt-append transaction commits (``profile``: settings.API_PROFILE)."""
    RECEIPTS_APPENDED.labels(profile=_label(profile)).inc(count)


def receipts_refused(kind: str) -> None:
    """Call when a pushed receipt is refused (``kind``: the verdict kind, e.g. Malformed)."""
    RECEIPTS_REFUSED.labels(kind=_label(kind)).inc()


def approval_transition(to_status: str) -> None:
    """Call after an approval's status change commits (``to_status``: the new status)."""
    APPROVAL_TRANSITIONS.labels(to_status=_label(to_status)).inc()


def rate_limit_hit(plane: str) -> None:
    """Call when a request is refused with 429 (``plane``: ``sdk`` or ``dashboard``)."""
    RATE_LIMIT_HITS.labels(plane=_label(plane)).inc()


def over_capacity(reason: str) -> None:
    OVER_CAPACITY.labels(reason=_label(reason)).inc()


def observe_request(*, route: str, method: str, status: int, duration_seconds: float) -> None:
    """One answered request (called by the request-log middleware for every request)."""
    method = method if method in _METHODS else "other"
    HTTP_REQUESTS.labels(route=_label(route), method=method, status=str(status)).inc()
    if route == RECEIPT_PUSH_ROUTE:
        RECEIPT_PUSH_SECONDS.observe(duration_seconds)


@lru_cache(maxsize=8)
def _networks(
    allowed: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in allowed)


def scrape_allowed(request: HttpRequest) -> bool:
    """The direct peer is in ``METRICS_ALLOWED_IPS`` and the request was not relayed.

    Behind the reverse proxy every request arrives from the proxy's own (often loopback)
    address, so a request carrying ``X-Forwarded-For`` came through it from somewhere else
    and is refused: scrapers talk to gunicorn directly.
    """
    if request.META.get("HTTP_X_FORWARDED_FOR"):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in _networks(tuple(settings.METRICS_ALLOWED_IPS)))


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


# Not a form: no CSRF check, so a method the route does not serve (``QUERY`` is unsafe to
# Django's CSRF middleware) gets its 405 with ``Allow``, in the profile's error body.
@csrf_exempt
def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        refused = error_response(
            status=HTTPStatus.METHOD_NOT_ALLOWED,
            code="method_not_allowed",
            message=f"method {request.method} is not allowed here",
        )
        refused["Allow"] = "GET, HEAD"
        return refused
    if not settings.METRICS_ENABLED:
        raise Http404("metrics are disabled")
    if not scrape_allowed(request):
        return error_response(
            status=HTTPStatus.FORBIDDEN,
            code="forbidden",
            message="metrics are not served to this address",
        )
    return HttpResponse(
        generate_latest(_registry()) + _task_queue_lines(), content_type=CONTENT_TYPE_LATEST
    )


def _task_queue_lines() -> bytes:
    """The background queue's state, read from the database at scrape time (the same
    value whichever process answers, so not a per-process metric)."""
    # readiness imports capacity, which imports this module: a top-level import is a cycle.
    from apps.common.readiness import task_queue, tasks_running

    try:
        state = task_queue()
        running = tasks_running()
    except Exception:  # the scrape still answers; the gauges are just absent
        return b""
    oldest = state["oldest_ready_seconds"]
    return (
        "# HELP mirror_task_queue_ready Background tasks due now.\n"
        "# TYPE mirror_task_queue_ready gauge\n"
        f"mirror_task_queue_ready {state['ready']}\n"
        "# HELP mirror_task_queue_oldest_ready_seconds How long the longest-waiting due task "
        "has waited (0: none due).\n"
        "# TYPE mirror_task_queue_oldest_ready_seconds gauge\n"
        f"mirror_task_queue_oldest_ready_seconds {oldest or 0:.3f}\n"
        "# HELP mirror_task_running Background tasks marked running.\n"
        "# TYPE mirror_task_running gauge\n"
        f"mirror_task_running {running['running']}\n"
        "# HELP mirror_task_running_over_bound Background tasks marked running for longer "
        "than TASK_RUNNING_BOUND_SECONDS.\n"
        "# TYPE mirror_task_running_over_bound gauge\n"
        f"mirror_task_running_over_bound {running['over_bound']}\n"
    ).encode()
