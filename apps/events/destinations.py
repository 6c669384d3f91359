"""Where a webhook may go, and the one HTTP POST that takes it there.

Outbound requests are the service's only way into other networks, so they are held to:

* URLs as they go on the wire: a non-ASCII host in IDNA, a non-ASCII path or query
  percent-encoded as UTF-8 (as browsers do); stored so, and what cannot be encoded is
  refused when the URL is given (a URL stored before is encoded again at each attempt);
* public destinations only (unless WEBHOOK_ALLOW_PRIVATE_DESTINATIONS): the host is
  resolved and *every* address must be globally reachable (and so must the IPv4 address
  a 6to4, NAT64, IPv4-mapped or IPv4-compatible address carries), then the connection
  goes to the checked address (no second resolution a rebinding DNS could answer
  differently), with the URL's host for ``Host`` and for TLS (SNI, certificate); a refusal
  never names the addresses the name resolved to;
* no redirect followed (http.client follows none: a 3xx is a failed attempt);
* one deadline of WEBHOOK_TIMEOUT_SECONDS for the whole attempt (connecting, TLS, sending,
  the answer's headers and body; each socket operation gets only what is left of it), and
  at most WEBHOOK_MAX_RESPONSE_BYTES of the answer read.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit, urlunsplit

import idna
from django.conf import settings

from apps.common.errors import InvalidInput
from apps.tenancy.models import Role

# Who may manage (add, change, remove) webhook endpoints, and so see their URLs whole.
ENDPOINT_MANAGER = Role.MANAGER

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MAX_URL_LENGTH = 2000  # the stored column's


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


# Printable ASCII but the space: what a URL may carry as it is. Everything else in a path,
# query or fragment is percent-encoded as UTF-8; ``%`` itself is kept, so escapes a URL
# already has are not escaped twice.
_URL_SAFE = "".join(chr(code) for code in range(0x21, 0x7F))


def encoded_url(url: str) -> str:
    """``url`` as it goes on the wire, and is stored: a non-ASCII host in IDNA (IDNA 2008
    with the UTS #46 mapping, as browsers do), the path, query and fragment percent-encoded
    where they are not printable ASCII. A URL that is already so comes back unchanged;
    DestinationRefused for what cannot be encoded."""
    if all(char in _URL_SAFE for char in url):
        return url
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise DestinationRefused("url: not a valid URL") from None
    netloc = parts.netloc
    if "@" in netloc:
        raise DestinationRefused("url: must not carry credentials")
    if host and not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except (UnicodeError, ValueError) as e:  # idna.IDNAError is a UnicodeError
            raise DestinationRefused(f"url: the host cannot be written in IDNA ({e})") from None
        netloc = host if port is None else f"{host}:{port}"
    try:
        path, query, fragment = (
            quote(part, safe=_URL_SAFE) for part in (parts.path, parts.query, parts.fragment)
        )
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 for it
        raise DestinationRefused(
            "url: the path or query cannot be encoded (not Unicode text)"
        ) from None
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


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


# Ranges ``ipaddress`` (as of Python 3.11) still counts as global although no webhook
# receiver can be there (IANA's special-purpose registries: not globally reachable, or
# deprecated).
_NOT_GLOBAL = [
    ipaddress.ip_network(network)
    for network in (
        "192.0.0.0/24",  # IETF protocol assignments (RFC 6890)
        "192.88.99.0/24",  # 6to4 relay anycast, deprecated (RFC 7526)
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215): a private network's
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment routing SIDs (RFC 9602)
        "fec0::/10",  # site-local, deprecated (RFC 3879)
    )
]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix (RFC 6052): global
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated (RFC 4291)


def _globally_reachable(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    # ``is_global`` leaves out multicast (224.0.1.0/24, ff0e::/16 count as global) and, for
    # IPv6, the unassigned space ``is_reserved`` names.
    return (
        ip.is_global
        and not ip.is_multicast
        and not ip.is_reserved
        and not any(ip in network for network in _NOT_GLOBAL)
    )


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries, where the network delivers to it: 6to4
    (2002:XXXX:XXXX::/48), NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and IPv4-compatible."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or ip in _NAT64_LOCAL or ip in _IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(address: str) -> bool:
    """Whether webhooks may go to ``address``: globally reachable, and so is the IPv4
    address it carries, if any."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # the connection goes to the IPv4 address itself
            return _globally_reachable(ip.ipv4_mapped)
        embedded = _embedded_ipv4(ip)
        if embedded is not None and not _globally_reachable(embedded):
            return False
        if ip in _NAT64:  # ``ipaddress`` counts ::/8 reserved, the NAT64 prefix with it
            return True
    return _globally_reachable(ip)


# The addresses the name resolved to are not said: they would map a private network. The
# setting that allows private destinations is named, for a developer on a laptop.
NOT_PUBLIC = (
    "url: not a public destination (WEBHOOK_ALLOW_PRIVATE_DESTINATIONS=true allows private "
    "addresses, for development only)"
)


def _not_public() -> DestinationRefused:
    return DestinationRefused(NOT_PUBLIC)


def resolve(url: str) -> Target:
    """The URL's parts (encoded) and the address to connect to; DestinationRefused when
    the host does not resolve or (unless allowed) any of its addresses is not public."""
    scheme, host, port, path = _parsed(encoded_url(url))
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise DestinationRefused(f"url: the host {host!r} does not resolve ({e})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise DestinationRefused(f"url: the host {host!r} has no address")
    if not settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS and not all(map(is_public, addresses)):
        raise _not_public()
    return Target(scheme=scheme, host=host, port=port, path=path, address=addresses[0])


def check_url(url: str) -> str:
    """``url`` encoded for the wire (what to store), or DestinationRefused for a URL no
    delivery could use (checked again at every delivery)."""
    encoded = encoded_url(url)
    if len(encoded) > MAX_URL_LENGTH:
        raise DestinationRefused(
            f"url: at most {MAX_URL_LENGTH} characters"
            + (" once encoded" if encoded != url else "")
        )
    resolve(encoded)
    return encoded


class _Deadline:
    """The one bound on an attempt. Each socket operation is given what is left of it, so
    an answer trickled a byte at a time (every read within any per-read timeout) still
    ends when the attempt's time is up."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + seconds

    def left(self) -> float:
        left = self._at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out after {self.seconds:g} s")
        return left


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer)


class _DeadlineSocket:
    """The connected socket as http.client uses it (``sendall``, ``makefile``, ``close``),
    every send and read under the deadline. ``close`` leaves the socket open: http.client
    closes the connection of a ``Connection: close`` answer before reading its body; the
    attempt closes the socket itself when it ends."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: bytes) -> None:
        # One send at a time, each under what is left: SSLSocket.sendall would give every
        # chunk the whole timeout again.
        view = memoryview(data)
        while view:
            self._sock.settimeout(self._deadline.left())
            view = view[self._sock.send(view) :]

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._deadline))

    def close(self) -> None:
        pass


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the checked address, every step under the attempt's deadline."""

    def __init__(self, target: Target, deadline: _Deadline) -> None:
        super().__init__(target.host, target.port)
        self._address = target.address
        self._deadline = deadline
        self.raw_socket: socket.socket | None = None

    def _connected(self) -> socket.socket:
        sock = socket.create_connection((self._address, self.port), self._deadline.left())
        self.raw_socket = sock
        return sock

    def connect(self) -> None:
        self.sock = _DeadlineSocket(self._connected(), self._deadline)

    def close_socket(self) -> None:
        self.close()
        if self.raw_socket is not None:
            self.raw_socket.close()


class _PinnedHTTPSConnection(_PinnedHTTPConnection):
    default_port = http.client.HTTPS_PORT

    def connect(self) -> None:
        sock = self._connected()
        sock.settimeout(self._deadline.left())  # the handshake as a whole (ssl's own deadline)
        tls = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        self.raw_socket = tls
        self.sock = _DeadlineSocket(tls, self._deadline)


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
    deadline = _Deadline(float(settings.WEBHOOK_TIMEOUT_SECONDS))
    connection = (
        _PinnedHTTPSConnection(target, deadline)
        if target.scheme == "https"
        else _PinnedHTTPConnection(target, deadline)
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
        return PostResult(None, elapsed(), f"timed out after {deadline.seconds:g} s", b"")
    except (OSError, http.client.HTTPException, ValueError) as e:
        # What the receiver made of the exchange (refused, reset, a malformed answer):
        # a failed attempt like any other.
        return PostResult(None, elapsed(), f"{type(e).__name__}: {e}"[:300], b"")
    finally:
        connection.close_socket()


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
