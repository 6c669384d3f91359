"""How people come into the console: the invitation page (set a password, join with the
account signed in, or go on to single sign-on). Every write is a tenancy service."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import SetPasswordForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from apps.common.errors import DomainError, NotFound
from apps.tenancy.models import Invitation
from apps.tenancy.selectors import sso_config
from apps.tenancy.services import invitation_accept, invitation_from_token, invitation_open
from apps.tenancy.services.invitations import account_for_email

# Signing in after setting the password: the password backend, named (several are set).
PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"  # noqa: S105 (a path)


def _page(
    request: HttpRequest, context: dict[str, Any], status: int = HTTPStatus.OK
) -> HttpResponse:
    response = render(request, "console/invitation.html", context, status=status)
    # The URL is a credential: never in another site's Referer, never in a cache. Not
    # "no-referrer": a browser then posts the form with ``Origin: null``, which CSRF refuses.
    response["Referrer-Policy"] = "same-origin"
    response["Cache-Control"] = "no-store"
    return response


def _closed_page(request: HttpRequest, token: str, error: DomainError) -> HttpResponse:
    invitation: Invitation | None = None
    if not isinstance(error, NotFound):
        invitation = invitation_from_token(token)
    return _page(request, {"refusal": error.message, "invitation": invitation}, error.status)


def _new_account_form(invitation: Invitation, data: Any = None) -> SetPasswordForm[Any]:
    # Django's own set-password form, on the account the invitation would create (unsaved:
    # the service creates it), so its validators see the username and email.
    user_model = get_user_model()
    user = user_model(**{user_model.USERNAME_FIELD: invitation.email}, email=invitation.email)
    return SetPasswordForm(user, data)


@require_http_methods(["GET", "POST"])
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    try:
        invitation = invitation_open(token)
    except DomainError as closed:
        return _closed_page(request, token, closed)
    form = _new_account_form(invitation)
    error = ""
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "join" and request.user.is_authenticated:
                invitation_accept(token=token, user=request.user)
                return _landing(invitation)
            if action == "password" and not request.user.is_authenticated:
                form = _new_account_form(invitation, request.POST)
                if form.is_valid():
                    accepted = invitation_accept(
                        token=token, password=form.cleaned_data["new_password1"]
                    )
                    login(request, accepted.membership.user, backend=PASSWORD_BACKEND)
                    return _landing(invitation)
            else:
                error = "This form does not fit who is signed in: reload the page."
        except DomainError as refusal:
            error = refusal.message
    context = {
        "invitation": invitation,
        "org": invitation.org,
        "token": token,
        "form": form,
        "error": error,
        "has_account": account_for_email(invitation.email) is not None,
        "sso": sso_config(org=invitation.org) is not None,
    }
    status = HTTPStatus.OK if not error and not form.errors else HTTPStatus.UNPROCESSABLE_ENTITY
    return _page(request, context, status)


def _landing(invitation: Invitation) -> HttpResponse:
    """The org's console: its dashboard."""
    return HttpResponseRedirect(reverse("admin:tenancy_org_dashboard", args=[invitation.org_id]))
