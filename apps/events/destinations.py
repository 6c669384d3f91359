"""Where a webhook may go, and the one HTTP POST that takes it there.

Outbound requests are the service's only way into other networks, so they are held to:

* public destinations only (unless WEBHOOK_ALLOW_PRIVATE_DESTINATIONS): the host is
  resolved and *every* address checked (private, loopback, link-local, multicast,
  reserved, unspecified, and the IPv4 addresses mapped into IPv6 are refused), then the
  connection goes to the checked address (no second resolution a rebinding DNS could
  answer differently), with the URL's host for ``Host`` and for TLS (SNI, certificate);
* no redirect followed (http.client follows none: a 3xx is a failed attempt);
* a timeout on connecting and on each read, and at most WEBHOOK_MAX_RESPONSE_BYTES of the
  answer read.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from apps.common.errors import InvalidInput
from apps.tenancy.models import Role

# Who may manage (add, change, remove) webhook endpoints, and so see their URLs whole.
ENDPOINT_MANAGER = Role.MANAGER


class DestinationRefused(InvalidInput):
    """The URL names a destination webhooks may not reach (or no reachable one)."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str
    address: str  # the checked address the connection goes to


@dataclass(frozen=True)
class PostResult:
    status: int | None  # None: no HTTP answer (refused, timeout, connection error)
    latency_ms: int
    error: str
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def _parsed(url: str) -> tuple[str, str, int, str]:
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:
        raise DestinationRefused("url: not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise DestinationRefused("url: must be http:// or https://")
    if not hostname:
        raise DestinationRefused("url: names no host")
    if parts.username or parts.password:
        raise DestinationRefused("url: must not carry credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise DestinationRefused("url: the port is not a number in range") from None
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, hostname, port, path


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def resolve(url: str) -> Target:
    """The URL's parts and the address to connect to; DestinationRefused when the host
    does not resolve or (unless allowed) any of its addresses is not public."""
    scheme, host, port, path = _parsed(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise DestinationRefused(f"url: the host {host!r} does not resolve ({e})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise DestinationRefused(f"url: the host {host!r} has no address")
    if not settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS:
        refused = [address for address in addresses if not is_public(address)]
        if refused:
            raise DestinationRefused(
                f"url: {host!r} resolves to a private, loopback or link-local address "
                f"({', '.join(refused)}); webhooks go to public destinations only"
            )
    return Target(scheme=scheme, host=host, port=port, path=path, address=addresses[0])


def check_url(url: str) -> None:
    """Refuse a URL no delivery could use (checked again at every delivery)."""
    if len(url) > 2000:
        raise DestinationRefused("url: at most 2000 characters")
    resolve(url)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
        self._address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def post(url: str, body: bytes, headers: dict[str, str]) -> PostResult:
    """POST ``body`` to ``url`` under the rules in the module doc. Never raises for the
    destination's behaviour: the result says what happened."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        target = resolve(url)
    except DestinationRefused as e:
        return PostResult(status=None, latency_ms=elapsed(), error=e.message[:300], body=b"")
    timeout = float(settings.WEBHOOK_TIMEOUT_SECONDS)
    connection: http.client.HTTPConnection = (
        _PinnedHTTPSConnection(target, timeout)
        if target.scheme == "https"
        else _PinnedHTTPConnection(target, timeout)
    )
    try:
        connection.request(
            "POST",
            target.path,
            body=body,
            headers={
                **headers,
                "Content-Type": "application/json",
                "User-Agent": f"{settings.PRODUCT_NAME}-Webhooks/1",
            },
        )
        response = connection.getresponse()
        answer = response.read(settings.WEBHOOK_MAX_RESPONSE_BYTES)
        return PostResult(status=response.status, latency_ms=elapsed(), error="", body=answer)
    except TimeoutError:
        return PostResult(None, elapsed(), f"timed out after {timeout:g} s", b"")
    except (OSError, http.client.HTTPException) as e:
        return PostResult(None, elapsed(), f"{type(e).__name__}: {e}"[:300], b"")
    finally:
        connection.close()


MASK = "…"


def masked_url(url: str) -> str:
    """``url`` as shown to a reader who may not manage the endpoint: scheme, host and port
    only. A webhook URL often is its own credential (a Slack incoming-webhook path, a
    ``?token=``), so the path, query, fragment and any user information are replaced by one
    ``…``; a URL that does not parse is all ``…``."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return MASK
    if not parts.scheme or not host:
        return MASK
    if ":" in host:
        host = f"[{host}]"
    shown = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    hidden = parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc
    return f"{shown}/{MASK}" if hidden else f"{shown}/"


def url_shown(url: str, *, role: Role | None) -> str:
    """The one rule for showing an endpoint's URL, in the console and the API: whole to a
    role that may manage endpoints (:data:`ENDPOINT_MANAGER` or above), masked to any other
    reader (:func:`masked_url`)."""
    if role is not None and role.at_least(ENDPOINT_MANAGER):
        return url
    return masked_url(url)
