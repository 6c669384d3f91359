"""SDK-plane authentication: an API key in ``x-api-key`` or ``Authorization: Bearer``."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from apps.tenancy.models import ApiKey, Org
from apps.tenancy.services import api_key_authenticate


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
    that matches no active key (unknown, wrong secret, revoked): 401.
    """

    def authenticate(self, request: Request) -> tuple[ApiKeyPrincipal, ApiKey] | None:
        from_header: str = request.META.get("HTTP_X_API_KEY", "")
        presented = from_header.strip() or presented_bearer(request)
        if not presented:
            return None
        api_key = api_key_authenticate(presented=presented)
        if api_key is None:
            raise AuthenticationFailed("invalid or revoked API key")
        return ApiKeyPrincipal(api_key=api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="sdk"'
