"""OpenID Connect sign-in to the console, per org, on mozilla-django-oidc.

The library does the authorization code flow's client side: state, nonce and PKCE kept in
the session, the code exchanged at the token endpoint, the ID token's signature checked
against the provider's published keys, the userinfo fetched. It reads one provider from
settings; here each org has its own (:class:`~apps.tenancy.models.SsoConfig`), so the sign-in
views put the org on the request (``request.sso_org_id``) and :class:`OrgOidcBackend` takes
that org's provider: its endpoints from the issuer's discovery document, its client
(``apps.tenancy.sso_provider``), its rules (:func:`~apps.tenancy.services.sso.sso_sign_in`).

Two checks the library leaves out are made here: the ID token's audience must be this
org's client id and its issuer the org's issuer (the library decodes with
``verify_aud: False``), and its expiry and issue time are required.
"""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from apps.common.encryption import SecretUndecryptable
from apps.tenancy.models import Org, SsoConfig
from apps.tenancy.services.sso import SsoRefused, sso_refusal_record, sso_sign_in
from apps.tenancy.sso_provider import discovery, org_sso_config

logger = logging.getLogger(__name__)


class OrgOidcBackend(OIDCAuthenticationBackend):
    """The library's backend, with the provider of the org the sign-in is for."""

    # Read from the session's recorded backend (apps.console.services
    # signed_in_with_single_sign_on): an org may confirm at once the approver keys its
    # members enroll after signing in this way.
    single_sign_on = True
    config: SsoConfig
    issuer: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No provider in settings: the org's is set in authenticate().
        self.UserModel = get_user_model()
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        org_id = getattr(request, "sso_org_id", None)
        if request is None or org_id is None or "nonce" not in kwargs:
            return None  # a password sign-in: not this backend's
        org = Org.objects.filter(pk=org_id).first()
        try:
            self.config = org_sso_config(org_id)
            self.issuer = self.config.issuer
            document = discovery(self.issuer)
            self.OIDC_OP_TOKEN_ENDPOINT = document["token_endpoint"]
            self.OIDC_OP_USER_ENDPOINT = document["userinfo_endpoint"]
            self.OIDC_OP_JWKS_ENDPOINT = document["jwks_uri"]
            self.OIDC_RP_CLIENT_ID = self.config.client_id
            self.OIDC_RP_CLIENT_SECRET = self._client_secret(org_id)
            user = super().authenticate(request, **kwargs)
        except (SsoRefused, SuspiciousOperation, requests.RequestException) as refusal:
            reason = refusal.message if isinstance(refusal, SsoRefused) else str(refusal)
            request.sso_refusal = reason  # type: ignore[attr-defined]
            if org is not None:
                sso_refusal_record(org=org, reason=reason, email=getattr(self, "_email", ""))
            logger.info("single sign-on refused for org %s: %s", org_id, reason)
            # Stops Django trying the other backends, and answers "not signed in".
            raise PermissionDenied(reason) from refusal
        return user

    def _client_secret(self, org_id: int) -> str:
        try:
            return self.config.client_secret
        except SecretUndecryptable as error:
            # The deployment's to fix (its keys), said in the log; the person is refused.
            logger.error("single sign-on of org %s: %s", org_id, error)
            raise SsoRefused(
                "this org's client secret cannot be read by the service (its encryption "
                "keys changed); tell the operator"
            ) from error

    def _verify_jws(self, payload: Any, key: Any) -> dict[str, Any]:
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SsoRefused(f"the ID token is signed with {header.get('alg')!r}")
        try:
            claims: dict[str, Any] = jwt.decode(
                payload, key, algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.config.client_id, issuer=self.issuer,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
                leeway=settings.SSO_CLOCK_SKEW_SECONDS,
            )  # fmt: skip
        except jwt.ExpiredSignatureError:
            raise SsoRefused("the provider's ID token has expired") from None
        except jwt.InvalidAudienceError:
            raise SsoRefused("the ID token is for another client (wrong audience)") from None
        except jwt.InvalidIssuerError:
            raise SsoRefused("the ID token is from another issuer") from None
        except jwt.InvalidTokenError as error:
            raise SsoRefused(f"the ID token is not valid: {error}") from None
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            raise SsoRefused("the provider's userinfo is about someone else")
        claims = {**payload, **userinfo}
        self._email = str(claims.get("email") or "")
        return sso_sign_in(config=self.config, issuer=self.issuer, claims=claims).user

    def get_user(self, user_id: Any) -> Any:
        return self.UserModel._default_manager.filter(pk=user_id).first()
