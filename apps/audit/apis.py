"""GET /v1/audit/chain: the org's tamper-evident mirror chain (dashboard, auditor+)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.audit.selectors import audit_chain_window
from apps.common.api import DashboardApi
from apps.tenancy.models import Role
from apps.tenancy.permissions import console_principal, role_required

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class AuditChainApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    class QuerySerializer(serializers.Serializer[Any]):
        limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)
        before = serializers.IntegerField(min_value=1, required=False)

    def get(self, request: Request) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        window = audit_chain_window(
            org=console_principal(request).org,
            limit=query.validated_data["limit"],
            before=query.validated_data.get("before"),
        )
        return Response(
            {
                "head": window.head,
                "size": window.size,
                "entries": window.entries,
                "next": window.next_before,
            }
        )
