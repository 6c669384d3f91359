"""An org's OpenID Connect provider, as the single sign-on views and the backend
(``apps.tenancy.sso``) both read it: the org's enabled configuration and the issuer's
discovery document.

Apart from the backend because the backend imports PyJWT and, through it, cryptography's
bindings (about 7 MB of a worker's memory): the sign-in views are part of every URL conf
and so loaded by every worker at start, while the backend is needed only by a sign-in.
"""

from __future__ import annotations

import time
from typing import Any

import requests
from django.conf import settings

from apps.tenancy.models import SsoConfig
from apps.tenancy.org_context import activate_orgs
from apps.tenancy.services.sso import SsoRefused

# Discovery documents, per issuer: (fetched at, monotonic seconds; the document).
_discovered: dict[str, tuple[float, dict[str, Any]]] = {}
DISCOVERY_SECONDS = 300
ENDPOINTS = ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint")


def discovery(issuer: str) -> dict[str, Any]:
    """The provider's discovery document (OpenID Connect Discovery 1.0), kept a few minutes;
    its ``issuer`` must be the configured one, and its endpoints must be there."""
    if not issuer.startswith("https://") and not settings.SSO_ALLOW_HTTP_ISSUERS:
        raise SsoRefused(f"the issuer {issuer} is not https (SSO_ALLOW_HTTP_ISSUERS is off)")
    now = time.monotonic()
    cached = _discovered.get(issuer)
    if cached is not None and now - cached[0] < DISCOVERY_SECONDS:
        return cached[1]
    try:
        answer = requests.get(
            f"{issuer}/.well-known/openid-configuration",
            timeout=settings.SSO_TIMEOUT_SECONDS,
            allow_redirects=False,
        )
        answer.raise_for_status()
        document = answer.json()
    except (requests.RequestException, ValueError) as error:
        raise SsoRefused(f"the provider's discovery document could not be read: {error}") from None
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        raise SsoRefused(f"the discovery document at {issuer} names another issuer")
    missing = [name for name in ENDPOINTS if not isinstance(document.get(name), str)]
    if missing:
        raise SsoRefused(f"the provider's discovery document lacks {', '.join(missing)}")
    _discovered[issuer] = (now, document)
    return document


def org_sso_config(org_id: int) -> SsoConfig:
    activate_orgs([org_id])
    config = SsoConfig.objects.select_related("org").filter(org_id=org_id, enabled=True).first()
    if config is None:
        raise SsoRefused("this org has no single sign-on (any more)")
    return config
