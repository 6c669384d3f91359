"""Authentication of the two planes.

SDK plane: an API key in ``x-api-key`` or ``Authorization: Bearer``. Dashboard plane: a
console session JWT in ``Authorization: Bearer``. Neither credential passes the other.

A presented credential that fails counts against its client address; a client past that
limit is refused 429 before its credential is looked up (``failures_counted`` over
``apps.tenancy.credential_limits``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework_simplejwt.authentication import JWTAuthentication
from rest_framework_simplejwt.tokens import Token

from apps.tenancy.console_tokens import console_session_membership
from apps.tenancy.credential_limits import failure_count, seconds_locked, vouch, vouched
from apps.tenancy.models import ApiKey, Membership, Org, Role
from apps.tenancy.services import api_key_authenticate, api_key_recall


class TooManyFailures(Throttled):
    default_detail = "Too many failed authentications from this address."


@contextmanager
def failures_counted(
    request: HttpRequest | Any,
    refused: type[Exception] | tuple[type[Exception], ...] = AuthenticationFailed,
    *,
    credential: str | None = None,
) -> Iterator[None]:
    """Around an API credential check: a client past its limit is refused first (DRF's
    ``Throttled``, which each profile answers 429 in its own body with ``Retry-After``)
    unless ``credential`` authenticated within the window; a ``refused`` exception from the
    block counts one failure, and a block that completes vouches for ``credential``."""
    wait = seconds_locked(request)
    if wait is not None and not vouched(credential):
        raise TooManyFailures(wait=wait)
    try:
        yield
    except refused:
        failure_count(request)
        raise
    if credential:
        vouch(credential)


@dataclass(frozen=True)
class ApiKeyPrincipal:
    """``request.user`` for SDK-plane requests: the org acting through one of its keys."""

    api_key: ApiKey

    is_authenticated = True
    is_anonymous = False

    @property
    def org(self) -> Org:
        return self.api_key.org


def presented_bearer(request: Request) -> str | None:
    header: str = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return None
    return credential.strip()


class ApiKeyAuthentication(BaseAuthentication):
    """``x-api-key: <key>`` and ``Authorization: Bearer <key>`` are equivalent.

    No credential: None (DRF answers 401 through ``authenticate_header``). A credential
    that matches no active key (unknown, wrong secret, revoked): 401, counted against the
    client's address; past that limit: 429 before the lookup. A key this worker
    authenticated within ``API_KEY_CACHE_SECONDS`` passes without a round trip.
    """

    def presented_key(self, request: Request) -> str | None:
        from_header: str = request.META.get("HTTP_X_API_KEY", "")
        return from_header.strip() or presented_bearer(request)

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        presented = self.presented_key(request)
        if not presented:
            return None
        # A key that authenticated here seconds ago is vouched for (``key_cache``).
        recalled = api_key_recall(presented=presented)
        if recalled is not None:
            return ApiKeyPrincipal(api_key=recalled), recalled
        with failures_counted(request, credential=presented):
            api_key = api_key_authenticate(presented=presented)
            if api_key is None:
                raise AuthenticationFailed("invalid or revoked API key")
        return ApiKeyPrincipal(api_key=api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="sdk"'


@dataclass(frozen=True)
class ConsolePrincipal:
    """``request.user`` on the dashboard plane: a console member acting in one org."""

    membership: Membership

    is_authenticated = True
    is_anonymous = False

    @property
    def org(self) -> Org:
        return self.membership.org

    @property
    def role(self) -> Role:
        return Role(self.membership.role)


class ConsoleJwtAuthentication(JWTAuthentication):
    """``Authorization: Bearer <session JWT>`` from the console. API keys never pass here.

    The role is read from the current membership on every request (one indexed query), so
    a removed or downgraded member loses access no later than the token's next use; a token
    of an ended session (password changed, account deactivated, membership removed) is
    refused. Failures count against the client's address, as API keys do.
    """

    # request.user on this plane is a ConsolePrincipal, not a Django user model instance.
    def authenticate(  # type: ignore[override]
        self, request: Request
    ) -> tuple[ConsolePrincipal, Token] | None:
        header: bytes | None = self.get_header(request)
        if header is None:
            return None
        raw_token = self.get_raw_token(header)
        if raw_token is None:
            return None
        with failures_counted(request, credential=raw_token.decode("latin-1")):
            token = self.get_validated_token(raw_token)
            membership = console_session_membership(token=token)
            if membership is None:
                raise AuthenticationFailed("no live session behind this session token")
        return ConsolePrincipal(membership=membership), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="dashboard"'
