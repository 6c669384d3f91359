"""Credential guessing: failed authentications counted per client address and, for console
sign-ins, per username (django-ratelimit's fixed-window counters on the shared cache).

One per-address budget covers every door: console sign-ins (the admin's login), API keys
(``x-api-key`` or ``Authorization: Bearer``, either profile), session tokens and refresh
tokens. Only the console sign-in names a username (the API and the token routes present a
key or a token, never a username), so only it has the per-username budget. Only failures
count; a client that has used up a budget is answered 429 with ``Retry-After`` (the seconds
left in the window) before its credential is looked at, so a guesser costs no password
hashing and no database round trip (the API's credential checks apply this through
``apps.api.authentication.failures_counted``). The failure that reaches a limit logs one
WARNING line naming the address or username.

A client with no failures pays one cache read per credentialed request.
On a shared address (a NAT, a cluster's egress) one client's failures must not lock out its
neighbours' good credentials: an API key or session token that authenticated within the
window is remembered (a digest of it, in the shared cache, written once a window per worker)
and passes a locked address; a guessed credential never authenticated, so it is refused
before any database work all the same.

The client address is the peer's, except behind a trusted reverse proxy
(``TRUSTED_PROXY_IPS``, or a Unix-socket peer): then it is the right-most
``X-Forwarded-For`` entry that is not one of those proxies, which a client cannot forge.
IPv6 clients are counted per /64 (one host commonly holds a whole /64).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import time
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.core.cache import caches
from django.http import HttpRequest
from django_ratelimit import ALL
from django_ratelimit import core as ratelimit_core
from django_ratelimit.core import get_usage
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

ADDRESS_GROUP = "auth-failures:address"
USERNAME_GROUP = "auth-failures:console-username"
UNIX_SOCKET_CLIENT = "local"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)


def _parse(value: str) -> IPAddress | None:
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_trusted_proxy(address: IPAddress) -> bool:
    return any(address in network for network in _networks(tuple(settings.TRUSTED_PROXY_IPS)))


def client_address(request: HttpRequest | Any) -> str:
    """The client's address as counted: IPv4, or the /64 of an IPv6 address."""
    client = _parse(request.META.get("REMOTE_ADDR") or "")
    if client is None or _is_trusted_proxy(client):
        forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
        for entry in reversed(forwarded.split(",") if forwarded else []):
            hop = _parse(entry)
            if hop is None:
                break  # not written by a proxy we trust: stop at the last address that was
            client = hop
            if not _is_trusted_proxy(hop):
                break
    if client is None:
        return UNIX_SOCKET_CLIENT
    if isinstance(client, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network(f"{client}/64", strict=False).network_address) + "/64"
    return str(client)


def _normalized_username(username: object) -> str:
    """The username as the console's sign-in form authenticates it, so the check (on the raw
    POSTed name) and the count (on the name the form authenticated) name one bucket, and
    ``"alice "``, ``" alice"`` or ``"alice\\t"`` get no budget of their own: stripped of
    surrounding whitespace (the form field's ``strip``), normalized as the user model does
    (``normalize_username``) and as the form field does (NFKC), stripped again since NFKC
    may turn an edge character into a space. Case is kept: authentication looks the name up exactly
    (``ModelBackend``), so ``Alice`` is another account, with its own budget."""
    name = get_user_model().normalize_username(str(username).strip())
    return unicodedata.normalize("NFKC", str(name)).strip()


@dataclass(frozen=True)
class _Bucket:
    group: str
    value: str
    limit: int
    subject: str  # for the log line

    @property
    def rate(self) -> tuple[int, int]:
        return self.limit, settings.AUTH_FAILURE_WINDOW_SECONDS

    def count(self, request: HttpRequest | Any) -> dict[str, Any] | None:
        """Count one failure (django-ratelimit's ``get_usage``, incrementing): the usage
        after it, or None when the cache cannot be written (logged, not counted)."""
        value = self.value
        try:
            usage: dict[str, Any] | None = get_usage(
                request,
                group=self.group,
                key=lambda _group, _request: value,
                rate=self.rate,
                increment=True,
            )
        except RedisError:
            logger.warning("failed-authentication counter unavailable: %s not counted",
                           self.subject)  # fmt: skip
            return None
        return usage

    def failures(self) -> tuple[int, int] | None:
        """(failures so far in the current window, seconds left in it), in one cache read.

        Not ``get_usage(increment=False)``: that writes a zero for a new key and reads it
        back, two round trips on every credentialed request. The key is the package's own
        (``_get_window``, ``_make_cache_key``: django-ratelimit 4.1, pinned); the tests
        lock a client out through this read and the count above, so a change shows.
        """
        period = settings.AUTH_FAILURE_WINDOW_SECONDS
        window = ratelimit_core._get_window(self.value, period)
        key = ratelimit_core._make_cache_key(self.group, window, self.rate, self.value, ALL)
        try:
            count = caches[getattr(settings, "RATELIMIT_USE_CACHE", "default")].get(key, 0)
        except RedisError:
            logger.warning("failed-authentication counter unavailable: %s admitted unchecked",
                           self.subject)  # fmt: skip
            return None
        return int(count or 0), window - int(ratelimit_core.time.time())


def _buckets(request: HttpRequest | Any, username: object | None) -> list[_Bucket]:
    address = client_address(request)
    buckets = [
        _Bucket(ADDRESS_GROUP, address, settings.AUTH_FAILURES_PER_ADDRESS, f"address {address}")
    ]
    if username is not None:
        name = _normalized_username(username)
        buckets.append(
            _Bucket(USERNAME_GROUP, name, settings.LOGIN_FAILURES_PER_USERNAME,
                    f"console username {name[:150]!r}")
        )  # fmt: skip
    return buckets


def _seconds_left(time_left: int) -> int:
    # The window's last whole second still belongs to it: the next one is the first free.
    return max(1, int(time_left) + 1)


def seconds_locked(request: HttpRequest | Any, *, username: object | None = None) -> int | None:
    """Seconds until this client (and, for a console sign-in, this username) may try again,
    or None when no limit is reached. Reads only: nothing is counted."""
    if not settings.AUTH_FAILURE_LIMITS_ENABLED:
        return None
    for bucket in _buckets(request, username):
        failures = bucket.failures()
        if failures is not None and failures[0] >= bucket.limit:
            return _seconds_left(failures[1])
    return None


def failure_count(request: HttpRequest | Any, *, username: object | None = None) -> None:
    """Count one failed authentication; the one that reaches a limit logs the lockout."""
    if not settings.AUTH_FAILURE_LIMITS_ENABLED:
        return
    for bucket in _buckets(request, username):
        usage = bucket.count(request)
        if usage is not None and usage["count"] == bucket.limit:
            logger.warning(
                "authentication locked for %s: %d failures within %d s; refused (429) for "
                "the next %d s",
                bucket.subject,
                bucket.limit,
                settings.AUTH_FAILURE_WINDOW_SECONDS,
                _seconds_left(usage["time_left"]),
            )


VOUCHED_GROUP = "auth-ok"
# Worker-local: which credentials this worker already vouched for in the shared cache, and
# until when (so a good credential costs one cache write a window, not one a request).
_vouched_until: dict[str, float] = {}
_VOUCHED_LOCAL_MAX = 10_000


def _credential_key(credential: str) -> str:
    digest = hashlib.sha256(credential.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{VOUCHED_GROUP}:{digest}"


def vouch(credential: str) -> None:
    """Remember that ``credential`` authenticated: it passes a locked address this window."""
    if not settings.AUTH_FAILURE_LIMITS_ENABLED:
        return
    key = _credential_key(credential)
    now = time.monotonic()
    if _vouched_until.get(key, 0.0) > now:
        return
    window = settings.AUTH_FAILURE_WINDOW_SECONDS
    try:
        caches[getattr(settings, "RATELIMIT_USE_CACHE", "default")].set(key, 1, window)
    except RedisError:
        return
    if len(_vouched_until) >= _VOUCHED_LOCAL_MAX:
        _vouched_until.clear()
    _vouched_until[key] = now + window / 2


def vouched(credential: str | None) -> bool:
    """Whether ``credential`` authenticated within the window (it passes a locked address)."""
    if not credential:
        return False
    try:
        return bool(
            caches[getattr(settings, "RATELIMIT_USE_CACHE", "default")].get(
                _credential_key(credential)
            )
        )
    except RedisError:
        return False


def _count_failed_sign_in(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """A console sign-in failed (``django.contrib.auth.authenticate`` found no user)."""
    if request is None:  # authenticate() called outside a request: nobody to throttle
        return
    failure_count(request, username=credentials.get(get_user_model().USERNAME_FIELD, ""))


def connect_signals() -> None:
    user_login_failed.connect(_count_failed_sign_in, dispatch_uid="mirror_count_failed_sign_in")
