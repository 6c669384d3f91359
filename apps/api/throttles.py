"""DRF throttles over the rate limits of ``apps.tenancy.limits``: one bucket per org (SDK
plane) and per console user (dashboard), and the ``RateLimit-*`` headers of a decision.

Throttles run after authentication (the org or user is known), before permissions (an
authenticated request refused for its scope still counts and still carries the headers) and
before the body is read or verified.

When Redis cannot be reached the request is admitted (logged, without headers): the limiter
protects the service, an outage of it must not refuse every agent's receipts. The readiness
probe reports the cache as failed meanwhile.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apps.common import metrics
from apps.tenancy.limits import Clock, Decision, take

logger = logging.getLogger(__name__)


class _LimitThrottle(BaseThrottle):
    """DRF throttle over :func:`take`; the decision is kept on the request for headers."""

    plane = "sdk"
    clock: Clock = staticmethod(time.time)

    def bucket(self, request: Request) -> tuple[str, int, int] | None:
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        if not settings.RATE_LIMITS_ENABLED:
            return True
        bucket = self.bucket(request)
        if bucket is None:
            return True
        key, per_minute, burst = bucket
        try:
            decision = take(key, per_minute=per_minute, burst=burst, clock=type(self).clock)
        except RedisError:
            logger.warning("rate limiter unavailable: %s admitted unmetered", key, exc_info=True)
            return True
        request._rate_limit = decision  # type: ignore[attr-defined]  # read by headers
        self._decision = decision
        if not decision.allowed:
            metrics.rate_limit_hit(self.plane)
        return decision.allowed

    def wait(self) -> float | None:
        """Seconds until the next request is admitted (DRF's ``Retry-After``), never 0."""
        decision: Decision | None = getattr(self, "_decision", None)
        return float(decision.retry_after_seconds) if decision is not None else None


class OrgRateThrottle(_LimitThrottle):
    """SDK plane: one bucket per org, shared by all its keys, sized by its plan."""

    plane = "sdk"

    def bucket(self, request: Request) -> tuple[str, int, int] | None:
        org = getattr(request.user, "org", None)
        if org is None or org.pk is None:
            return None
        per_minute, burst = org.effective_rate
        return f"org:{org.pk}", per_minute, burst


class DashboardRateThrottle(_LimitThrottle):
    """Dashboard plane: one bucket per console user, apart from the SDK plane's."""

    plane = "dashboard"

    def bucket(self, request: Request) -> tuple[str, int, int] | None:
        membership = getattr(request.user, "membership", None)
        if membership is None:
            return None
        return (
            f"user:{membership.user_id}",
            settings.DASHBOARD_RATE_PER_MINUTE,
            settings.DASHBOARD_RATE_BURST,
        )


def rate_limit_decision(request: Any) -> Decision | None:
    return getattr(request, "_rate_limit", None)


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """IETF draft RateLimit-* headers (and Retry-After on a refusal)."""
    headers = {
        "RateLimit-Limit": str(decision.limit),
        "RateLimit-Remaining": str(decision.remaining),
        "RateLimit-Reset": str(decision.reset_seconds),
    }
    if not decision.allowed:
        headers["Retry-After"] = str(decision.retry_after_seconds)
    return headers
