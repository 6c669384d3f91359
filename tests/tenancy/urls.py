"""A minimal SDK-plane endpoint, to test authentication and scopes in isolation."""

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response

from apps.common.api import KeyScopedSdkApi
from apps.tenancy.models import Scope
from apps.tenancy.permissions import scope_required


class WhoAmIApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    def get(self, request: Request) -> Response:
        return Response({"org": request.user.org.slug, "prefix": request.auth.prefix})


urlpatterns = [path("v1/whoami", WhoAmIApi.as_view())]
