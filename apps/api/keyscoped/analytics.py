"""GET /v1/analytics: headline governance counters (dashboard, viewer+)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analytics.selectors import analytics_counters
from apps.api.keyscoped.base import DashboardApi
from apps.api.openapi import keyscoped_errors, ok
from apps.api.permissions import console_principal, role_required
from apps.api.serializers import PlainNumberField
from apps.tenancy.models import Role


class AnalyticsApi(DashboardApi):
    permission_classes = [role_required(Role.VIEWER)]

    class OutputSerializer(serializers.Serializer[Any]):
        key = serializers.CharField()
        label = serializers.CharField()  # type: ignore[assignment]
        value = PlainNumberField(allow_null=True)
        display = serializers.CharField()
        spark = serializers.ListField(
            child=serializers.IntegerField(), help_text="Daily series, 30 days, oldest first."
        )

        class Meta:
            ref_name = "StatCounter"

    @extend_schema(
        operation_id="analytics",
        summary="Headline governance counters with 30-day series (viewer+)",
        tags=["dashboard"],
        responses={200: ok(OutputSerializer(many=True)), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        counters = analytics_counters(org=console_principal(request).org)
        return Response(self.OutputSerializer(counters, many=True).data)
