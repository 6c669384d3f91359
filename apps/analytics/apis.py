"""GET /v1/analytics: headline governance counters (dashboard, viewer+)."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response

from apps.analytics.selectors import analytics_counters
from apps.common.api import DashboardApi
from apps.tenancy.models import Role
from apps.tenancy.permissions import console_principal, role_required


class AnalyticsApi(DashboardApi):
    permission_classes = [role_required(Role.VIEWER)]

    def get(self, request: Request) -> Response:
        counters = analytics_counters(org=console_principal(request).org)
        return Response([counter.as_dict() for counter in counters])
