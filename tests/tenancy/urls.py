"""A minimal SDK-plane endpoint, to test authentication and scopes in isolation."""

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi, KeyScopedSdkApi
from apps.api.permissions import role_required, scope_required
from apps.tenancy.models import Role, Scope


class WhoAmIApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    def get(self, request: Request) -> Response:
        return Response({"org": request.user.org.slug, "prefix": request.auth.prefix})


class AuditorOnlyApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    def get(self, request: Request) -> Response:
        return Response({"org": request.user.org.slug, "role": request.user.role.value})


urlpatterns = [
    path("v1/whoami", WhoAmIApi.as_view()),
    path("v1/dashboard-probe", AuditorOnlyApi.as_view()),
    *__import__("config.urls.keyscoped", fromlist=["urlpatterns"]).urlpatterns,
]
