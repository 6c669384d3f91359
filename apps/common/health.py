"""Liveness and readiness probes, unauthenticated and cheap.

``/healthz`` answers without touching the database, so a supervisor can poll it to learn
that the process is alive. ``/readyz`` checks what serving needs (database, cache,
migrations) so a load balancer or orchestrator sends traffic only to ready instances.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.common.openapi import ok, ref
from apps.common.readiness import readiness, task_queue
from apps.common.responses import logged_already

logger = logging.getLogger(__name__)


@extend_schema_view(
    get=extend_schema(
        operation_id="healthz",
        summary="Liveness: the process answers (no database)",
        tags=["operations"],
        auth=[],
        responses={200: ok("Health")},
    )
)
class HealthzApi(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


@extend_schema_view(
    get=extend_schema(
        operation_id="readyz",
        summary="Readiness: database, cache and migrations",
        tags=["operations"],
        auth=[],
        responses={
            200: ok("Readiness"),
            503: ok(ref("Readiness"), "Not ready; `failed` names the checks; see `Retry-After`."),
        },
    )
)
class ReadyzApi(APIView):
    """200 ``{"status": "ready", "checks"}``; 503 with ``Retry-After`` naming the failure."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        result = readiness()
        if result.ready:
            body: dict[str, object] = {"status": "ready", "checks": result.checks}
            try:
                body["task_queue"] = task_queue()
            except Exception:  # reported only; the probe answers whatever happens here
                logger.warning("readiness: the task queue could not be read", exc_info=True)
            return Response(body)
        # Each failing check was logged at WARNING with its cause.
        return logged_already(
            Response(
                {"status": "unavailable", "checks": result.checks, "failed": result.failed},
                status=HTTPStatus.SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(settings.RETRY_AFTER_SECONDS)},
            )
        )
