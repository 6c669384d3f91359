"""The claims the test provider gives: email, groups (the user's Django groups), name.

Two clients misbehave on purpose, by name, so the relying party's checks meet real,
signed ID tokens that must be refused: ``expired-id-tokens`` issues ID tokens that expired
an hour ago, ``wrong-audience`` issues ID tokens for another audience."""

from __future__ import annotations

import time
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

from tests.oidc_provider import EXPIRED, WRONG_AUDIENCE


class ProviderValidator(OAuth2Validator):
    oidc_claim_scope = None  # every claim, whatever the scopes

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "email_verified": True,
            "name": user.get_username(),
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def get_id_token_dictionary(self, token: Any, token_handler: Any, request: Any) -> Any:
        claims, expiration = super().get_id_token_dictionary(token, token_handler, request)
        if request.client.name == EXPIRED:
            claims["exp"] = int(time.time()) - 3600
            claims["iat"] = int(time.time()) - 7200
        if request.client.name == WRONG_AUDIENCE:
            claims["aud"] = "some-other-client"
        return claims, expiration
