"""Rate limits: a sustained rate plus a burst, per org (SDK plane) and per user (dashboard).

The algorithm is GCRA, the token bucket written as one timestamp per key: the "theoretical
arrival time" (TAT). With an emission interval ``T = 60 / per_minute`` seconds and a
capacity of ``burst``, a request at ``now`` is admitted when ``max(TAT, now) + T - now`` does
not exceed ``burst * T``; admitting it moves the TAT forward by ``T``. So ``burst`` requests
may arrive at once, after which they are admitted at the sustained rate.

The TAT lives in the shared cache: on Redis the read-check-write is one Lua script (atomic
across every worker and machine); with the local-memory cache (one process, SQLite trials)
a process lock makes it atomic. Limits are enforced through DRF throttle classes, after
authentication (the org or user is known) and before the body is read or verified.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from apps.common import metrics

Clock = Callable[[], float]

# Times are integer microseconds: Lua's tostring keeps only 14 significant digits, which
# at today's epoch is 0.1 ms, coarser than the emission interval of a fast plan.
_GCRA_LUA = """
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local capacity = tonumber(ARGV[3])
if tat < now then tat = now end
local next_tat = tat + interval
if next_tat - now > capacity * interval then
  return {0, string.format('%d', tat)}
end
redis.call('SET', KEYS[1], string.format('%d', next_tat),
           'PX', math.ceil((next_tat - now) / 1000) + 1000)
return {1, string.format('%d', next_tat)}
"""

_local_lock = threading.Lock()


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int  # the burst: requests admitted at once from a full bucket
    remaining: int  # requests admitted at once from now on
    reset_seconds: int  # until the bucket is full again
    retry_after_seconds: int  # until the next request is admitted (0 when allowed)


def _decide(allowed: bool, tat: float, now: float, interval: float, capacity: int) -> Decision:
    backlog = max(0.0, tat - now)  # seconds of sustained rate already spent
    remaining = max(0, math.floor((capacity * interval - backlog) / interval + 1e-9))
    retry = 0 if allowed else max(1, math.ceil(backlog + interval - capacity * interval))
    return Decision(
        allowed=allowed,
        limit=capacity,
        remaining=remaining,
        reset_seconds=max(0, math.ceil(backlog)),
        retry_after_seconds=retry,
    )


_redis_script: Any = None


def _redis_gcra() -> Any | None:
    """The GCRA script bound to the cache's Redis client (built once per process: a
    Redis client object is costly to construct, the connection pool is shared anyway), or
    None when the cache is not Redis."""
    global _redis_script
    if _redis_script is None:
        backend = getattr(cache, "_cache", None)
        get_client = getattr(backend, "get_client", None)
        if get_client is None:
            return None
        _redis_script = get_client(write=True).register_script(_GCRA_LUA)
    return _redis_script


def take(key: str, *, per_minute: int, burst: int, clock: Clock = time.time) -> Decision:
    """Admit or refuse one request for ``key`` and say what remains."""
    interval = 60.0 / per_minute
    now = clock()
    cache_key = f"ratelimit:{key}"
    script = _redis_gcra()
    if script is not None:
        now_us, interval_us = int(now * 1_000_000), max(1, round(interval * 1_000_000))
        allowed_flag, tat_us = script(keys=[cache_key], args=[now_us, interval_us, burst])
        return _decide(bool(allowed_flag), int(tat_us) / 1_000_000, now, interval, burst)
    with _local_lock:
        tat = max(float(cache.get(cache_key) or 0.0), now)
        next_tat = tat + interval
        if next_tat - now > burst * interval:
            return _decide(False, tat, now, interval, burst)
        cache.set(cache_key, next_tat, timeout=math.ceil(next_tat - now) + 1)
        return _decide(True, next_tat, now, interval, burst)


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
        decision = take(key, per_minute=per_minute, burst=burst, clock=type(self).clock)
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
