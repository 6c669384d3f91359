"""Single sign-on pages: the sign-in page asks for the org (or an email domain), then the
authorization code flow with that org's provider (mozilla-django-oidc's views, given the
org: ``apps.tenancy.sso``), and the landing in the org's console, or the refusal said.

The org's provider is read from ``apps.tenancy.sso_provider``, never the backend's module:
these pages are loaded by every worker at start, the backend (with PyJWT) only by a sign-in."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from apps.common.errors import DomainError
from apps.tenancy.services.sso import sso_org
from apps.tenancy.sso_provider import discovery, org_sso_config

# Session key: the org each pending sign-in is for, by its OAuth state (a pending invitation
# of the email the provider vouches for is accepted whichever way the sign-in started).
PENDING = "sso_pending"
MAX_PENDING = 20


def _refused(request: HttpRequest, message: str, status: int) -> HttpResponse:
    response = render(request, "console/sso.html", {"refusal": message, "key": ""}, status=status)
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def sso_page(request: HttpRequest) -> HttpResponse:
    """Which org's single sign-on: its slug or the email's domain."""
    response = render(request, "console/sso.html", {"key": request.GET.get("org", "")})
    response["Cache-Control"] = "no-store"
    return response


class SsoStartView(OIDCAuthenticationRequestView):
    """``/sso/start?org=<slug or email>``: on to the org's provider."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The provider is the org's (set in get), none from settings.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request: HttpRequest) -> HttpResponse:
        key = request.GET.get("org", "")
        if not key.strip():
            return HttpResponseRedirect(reverse("console-sso"))  # the page that asks
        org = sso_org(key)
        if org is None:
            return _refused(
                request, f"No org signs in with single sign-on as {key!r}: check the name.",
                HTTPStatus.NOT_FOUND,
            )  # fmt: skip
        try:
            self.config = org_sso_config(org.pk)
            self.OIDC_OP_AUTH_ENDPOINT = discovery(self.config.issuer)["authorization_endpoint"]
        except DomainError as refusal:
            return _refused(request, refusal.message, refusal.status)
        self.OIDC_RP_CLIENT_ID = self.config.client_id
        response = super().get(request)
        state = parse_qs(urlsplit(response["Location"]).query)["state"][0]
        pending = dict(request.session.get(PENDING, {}))
        while len(pending) >= MAX_PENDING:
            pending.pop(next(iter(pending)))
        pending[state] = {"org": org.pk}
        request.session[PENDING] = pending
        return response

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        return {"scope": self.config.scopes}


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """``/sso/callback``: the provider's answer, for the org its state was started for."""

    def get(self, request: HttpRequest) -> HttpResponse:
        state = request.GET.get("state", "")
        if not state:
            return HttpResponseRedirect(reverse("console-sso"))  # nothing to finish: start
        pending = dict(request.session.get(PENDING, {}))
        started = pending.pop(state, None)
        request.session[PENDING] = pending
        if started is None:
            return _refused(
                request, "This sign-in was not started here, or it was finished already: "
                "start again.", HTTPStatus.BAD_REQUEST,
            )  # fmt: skip
        self.org_id = int(started["org"])
        request.sso_org_id = self.org_id  # type: ignore[attr-defined]
        return super().get(request)

    @property
    def success_url(self) -> str:
        return reverse("admin:tenancy_org_dashboard", args=[self.org_id])

    def login_failure(self) -> HttpResponse:
        reason = getattr(self.request, "sso_refusal", "") or (
            "The provider did not sign you in" + (
                f": {self.request.GET['error']}" if self.request.GET.get("error") else ""
            )
        )  # fmt: skip
        return _refused(self.request, reason, HTTPStatus.FORBIDDEN)
