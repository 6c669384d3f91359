"""GET /v1/analytics: headline governance counters (dashboard, viewer+)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analytics.selectors import analytics_counters
from apps.api.keyscoped.base import DashboardApi
from apps.common.openapi import keyscoped_errors, list_of, ok
from apps.tenancy.models import Role
from apps.tenancy.permissions import console_principal, role_required


@extend_schema_view(
    get=extend_schema(
        operation_id="analytics",
        summary="Headline governance counters with 30-day series (viewer+)",
        tags=["dashboard"],
        responses={200: ok(list_of("StatCounter")), **keyscoped_errors(403)},
    )
)
class AnalyticsApi(DashboardApi):
    permission_classes = [role_required(Role.VIEWER)]

    def get(self, request: Request) -> Response:
        counters = analytics_counters(org=console_principal(request).org)
        return Response([counter.as_dict() for counter in counters])
