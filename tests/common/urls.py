"""Test-only routes for the operations layer, beside the key-scoped profile's own."""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.keyscoped.base import DashboardApi, KeyScopedSdkApi
from apps.api.permissions import console_principal, scope_required, sdk_principal
from apps.common.errors import ServiceUnavailable
from apps.tenancy.models import Scope

logger = logging.getLogger("tests.common.views")

HALF_WRITTEN = "half-written"


class WhoAmIApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    def get(self, request: Request, **_: object) -> Response:
        logger.info("serving whoami")
        return Response({"org": sdk_principal(request).org.slug})


class DashboardWhoAmIApi(DashboardApi):
    def get(self, request: Request) -> Response:
        return Response({"org": console_principal(request).org.slug})


class HalfWriteApi(KeyScopedSdkApi):
    """Writes a row, then the database goes away before the transaction commits."""

    authentication_classes = []
    permission_classes = [AllowAny]

    def post(self, request: Request) -> Response:
        with transaction.atomic():
            get_user_model().objects.create(username=HALF_WRITTEN)
            raise OperationalError("server closed the connection unexpectedly")


class SlowStatementApi(APIView):
    """Writes a row, then runs a statement past a (local) statement_timeout."""

    authentication_classes = []
    permission_classes = [AllowAny]

    def post(self, request: Request) -> Response:
        with transaction.atomic(), connection.cursor() as cursor:
            get_user_model().objects.create(username=HALF_WRITTEN)
            cursor.execute("SET LOCAL statement_timeout = 50")
            cursor.execute("SELECT pg_sleep(2)")
        return Response({"status": "finished"})


class RefusesApi(KeyScopedSdkApi):
    authentication_classes = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise ServiceUnavailable("the approvals backlog is full")


def plain_view_failing(request: HttpRequest) -> JsonResponse:
    raise OperationalError("connection to server at 127.0.0.1, port 1 failed")


def plain_view_bug(request: HttpRequest) -> JsonResponse:
    raise RuntimeError("a real bug")


urlpatterns = [
    path("test/whoami", WhoAmIApi.as_view(), name="test-whoami"),
    path("test/dashboard-whoami", DashboardWhoAmIApi.as_view(), name="test-dashboard-whoami"),
    path("test/half-write", HalfWriteApi.as_view(), name="test-half-write"),
    path("test/slow-statement", SlowStatementApi.as_view(), name="test-slow-statement"),
    path("test/refuses", RefusesApi.as_view(), name="test-refuses"),
    path("test/plain-failing", plain_view_failing, name="test-plain-failing"),
    path("test/plain-bug", plain_view_bug, name="test-plain-bug"),
    path("test/orgs/<int:org_id>/items/<slug:item>", WhoAmIApi.as_view()),
    *__import__("config.urls.keyscoped", fromlist=["urlpatterns"]).urlpatterns,
]
