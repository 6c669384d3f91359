"""Liveness and readiness probes, unauthenticated and cheap.

``/healthz`` answers without touching the database, so a supervisor can poll it to learn
that the process is alive. ``/readyz`` checks what serving needs (database, cache,
migrations) so a load balancer or orchestrator sends traffic only to ready instances.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.openapi import ok
from apps.common.readiness import readiness, task_queue
from apps.common.responses import logged_already

logger = logging.getLogger(__name__)


class HealthzApi(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    class OutputSerializer(serializers.Serializer[Any]):
        status = serializers.ChoiceField(["ok"])

        class Meta:
            ref_name = "Health"

    @extend_schema(
        operation_id="healthz",
        summary="Liveness: the process answers (no database)",
        tags=["operations"],
        auth=[],
        responses={200: ok(OutputSerializer)},
    )
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer({"status": "ok"}).data)


class TaskQueueSerializer(serializers.Serializer[Any]):
    ready = serializers.IntegerField(help_text="Background tasks due now.")
    oldest_ready_seconds = serializers.FloatField(
        allow_null=True, help_text="How long the longest-waiting due task has waited."
    )

    class Meta:
        ref_name = "TaskQueue"


class ReadyzApi(APIView):
    """200 ``{"status": "ready", "checks"}``; 503 with ``Retry-After`` naming the failure."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    class OutputSerializer(serializers.Serializer[Any]):
        status = serializers.ChoiceField(["ready", "unavailable"])
        checks = serializers.DictField(
            child=serializers.ChoiceField(["ok", "failed", "pending", "skipped"]),
            help_text="database, cache, migrations: each `ok` when ready.",
        )
        failed = serializers.ListField(
            child=serializers.CharField(), required=False, help_text="503 only"
        )
        task_queue = TaskQueueSerializer(
            required=False,
            help_text="200 only: the background queue (reported, never a failure).",
        )

        class Meta:
            ref_name = "Readiness"

    @extend_schema(
        operation_id="readyz",
        summary="Readiness: database, cache and migrations",
        tags=["operations"],
        auth=[],
        responses={
            200: ok(OutputSerializer),
            503: ok(OutputSerializer, "Not ready; `failed` names the checks; see `Retry-After`."),
        },
    )
    def get(self, request: Request) -> Response:
        result = readiness()
        if result.ready:
            body: dict[str, object] = {"status": "ready", "checks": result.checks}
            try:
                body["task_queue"] = task_queue()
            except Exception:  # reported only; the probe answers whatever happens here
                logger.warning("readiness: the task queue could not be read", exc_info=True)
            return Response(self.OutputSerializer(body).data)
        # Each failing check was logged at WARNING with its cause.
        answer = {"status": "unavailable", "checks": result.checks, "failed": result.failed}
        return logged_already(
            Response(
                self.OutputSerializer(answer).data,
                status=HTTPStatus.SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(settings.RETRY_AFTER_SECONDS)},
            )
        )
