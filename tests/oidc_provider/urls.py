"""The provider's routes: django-oauth-toolkit under /o/ (the issuer), the sign-in page, and
the route the tests set users and clients up with."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import Application


@csrf_exempt
def setup(request: HttpRequest) -> HttpResponse:
    """POST {"users": [...], "clients": [...]}: create or update them (tests only)."""
    if not constant_time_compare(request.headers.get("X-Setup-Secret", ""), settings.SETUP_SECRET):
        return JsonResponse({"detail": "no"}, status=403)
    body = json.loads(request.body)
    for spec in body.get("users", []):
        user, _ = get_user_model().objects.get_or_create(username=spec["username"])
        user.email = spec["email"]
        user.set_password(spec["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in spec["groups"]])
    for spec in body.get("clients", []):
        Application.objects.filter(client_id=spec["client_id"]).delete()
        Application.objects.create(
            client_id=spec["client_id"],
            client_secret=spec["client_secret"],
            name=spec.get("name", spec["client_id"]),
            redirect_uris=" ".join(spec["redirect_uris"]),
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )
    return JsonResponse({"ok": True})


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("test/setup", setup),
]
