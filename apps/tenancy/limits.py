"""Rate limits: a sustained rate plus a burst, per org (SDK plane) and per user (dashboard).

The algorithm is GCRA, the token bucket written as one timestamp per key: the "theoretical
arrival time" (TAT). With an emission interval ``T = 60 / per_minute`` seconds and a
capacity of ``burst``, a request at ``now`` is admitted when ``max(TAT, now) + T - now`` does
not exceed ``burst * T``; admitting it moves the TAT forward by ``T``. So ``burst`` requests
may arrive at once, after which they are admitted at the sustained rate.

The TAT lives in the shared cache: on Redis the read-check-write is one Lua script (atomic
across every worker and machine); with the local-memory cache (one process, SQLite trials)
a process lock makes it atomic. The API floor enforces the limits through its throttle
classes (``apps.api.throttles``); a Redis outage surfaces here as ``RedisError`` and the
caller decides what it means.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

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


_US = 1_000_000


def _decide(allowed: bool, tat_us: int, now_us: int, interval_us: int, capacity: int) -> Decision:
    """What a decision means for the headers, in exact integer microseconds: a refusal has
    0 remaining and waits at least 1 s (rounded up, never early)."""
    backlog = max(0, tat_us - now_us)  # of the sustained rate already spent
    window = capacity * interval_us
    remaining = max(0, (window - backlog) // interval_us)
    retry = 0 if allowed else max(1, -(-(backlog + interval_us - window) // _US))
    return Decision(
        allowed=allowed,
        limit=capacity,
        remaining=remaining,
        reset_seconds=-(-backlog // _US),
        retry_after_seconds=retry,
    )


_GCRA_SHA = hashlib.sha1(_GCRA_LUA.encode(), usedforsecurity=False).hexdigest()

# (cache location, Redis client): rebuilt when the cache settings change (tests switch them).
_redis_client: tuple[object, Any] | None = None


def _redis() -> Any | None:
    """The cache's Redis client (looked up once per process: a Redis client object is
    costly to construct, the connection pool is shared anyway), or None when the cache is
    not Redis."""
    global _redis_client
    location = settings.CACHES["default"].get("LOCATION")
    if _redis_client is None or _redis_client[0] != location:
        backend = getattr(cache, "_cache", None)
        get_client = getattr(backend, "get_client", None)
        if get_client is None:
            return None
        _redis_client = (location, get_client(write=True))
    return _redis_client[1]


def _gcra_on_redis(client: Any, redis_key: str, *args: int) -> list[Any]:
    """The GCRA script's answer for ``redis_key``: one EVALSHA on a connection of the
    client's pool (EVAL when Redis does not hold the script: restarted, flushed). On the
    connection itself: redis-py's command path (retry policy, observability hooks, response
    callbacks) cost each request about as much CPU again as the round trip. A connection
    found broken is dropped and the command sent once more on a fresh one, as redis-py's
    own retry does."""
    try:
        return _gcra_once(client.connection_pool, redis_key, *args)
    except (RedisConnectionError, RedisTimeoutError):
        return _gcra_once(client.connection_pool, redis_key, *args)


def _gcra_once(pool: Any, redis_key: str, *args: int) -> list[Any]:
    connection = pool.get_connection()
    try:
        try:
            connection.send_command("EVALSHA", _GCRA_SHA, 1, redis_key, *args)
            return list(connection.read_response())
        except NoScriptError:
            connection.send_command("EVAL", _GCRA_LUA, 1, redis_key, *args)
            return list(connection.read_response())
    except (RedisConnectionError, RedisTimeoutError):
        connection.disconnect()
        raise
    finally:
        pool.release(connection)


def take(key: str, *, per_minute: int, burst: int, clock: Clock = time.time) -> Decision:
    """Admit or refuse one request for ``key`` and say what remains."""
    # Integer microseconds on both paths: float seconds at today's epoch lose the emission
    # interval of a fast plan to rounding (a full bucket could refuse).
    now_us = round(clock() * _US)
    interval_us = max(1, round(60 * _US / per_minute))
    cache_key = f"ratelimit:{key}"
    client = _redis()
    if client is not None:
        # The script sees raw Redis keys: apply the cache's KEY_PREFIX and VERSION as
        # cache.get does, so deployments sharing one Redis database keep apart.
        redis_key = cache.make_key(cache_key)
        allowed_flag, tat = _gcra_on_redis(client, redis_key, now_us, interval_us, burst)
        return _decide(bool(allowed_flag), int(tat), now_us, interval_us, burst)
    with _local_lock:
        tat_us = max(int(cache.get(cache_key) or 0), now_us)
        next_tat_us = tat_us + interval_us
        if next_tat_us - now_us > burst * interval_us:
            return _decide(False, tat_us, now_us, interval_us, burst)
        cache.set(cache_key, next_tat_us, timeout=-(-(next_tat_us - now_us) // _US) + 1)
        return _decide(True, next_tat_us, now_us, interval_us, burst)
