"""GET /v1/audit/chain: the org's tamper-evident mirror chain (dashboard, auditor+)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.audit.selectors import audit_chain_window
from apps.common.api import DashboardApi
from apps.common.openapi import keyscoped_errors, ok
from apps.tenancy.models import Role
from apps.tenancy.permissions import console_principal, role_required

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@extend_schema_view(
    get=extend_schema(
        operation_id="audit_chain",
        summary="A window of the org's tamper-evident mirror chain, newest first (auditor+)",
        tags=["dashboard"],
        parameters=[
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
                OpenApiParameter.QUERY,
                description="Entries in the window.",
            ),
            OpenApiParameter(
                "before",
                {"type": "integer", "minimum": 1},
                OpenApiParameter.QUERY,
                description="Only entries with `seq` below this (the previous answer's `next`).",
            ),
        ],
        responses={200: ok("AuditChain"), **keyscoped_errors(403, 422)},
    )
)
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
