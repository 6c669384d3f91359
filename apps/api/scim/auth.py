"""The org's SCIM bearer token, checked before any SCIM view runs (django-scim2's
``AUTH_CHECK_MIDDLEWARE``, a decorator around each view's dispatch)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django_scim.constants import SCIM_CONTENT_TYPE, SchemaURI

from apps.tenancy.services.scim import scim_authenticate


def _refused() -> HttpResponse:
    body = {
        "schemas": [SchemaURI.ERROR],
        "status": "401",
        "detail": "a valid SCIM token of the org is required (Authorization: Bearer scim_…)",
    }
    response = HttpResponse(json.dumps(body), status=401, content_type=SCIM_CONTENT_TYPE)
    response["WWW-Authenticate"] = 'Bearer realm="scim"'
    return response


class ScimTokenCheck:
    """Admits a request that carries an active SCIM token of an org (``request.scim_token``,
    the connection limited to that org); anything else is 401."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        token = scim_authenticate(presented.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            return _refused()
        request.scim_token = token  # type: ignore[attr-defined]
        response: HttpResponse = self.get_response(request, *args, **kwargs)
        return response


def is_scim_client(user: Any) -> bool:
    # Not consulted: ScimTokenCheck decides (django-scim2 asks this of request.user).
    return False
