"""Dashboard-plane routes of background evidence exports (auditor+): the request answers
202 with the job's link, the link its state, the download the tar once it is ready."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok, path_parameter
from apps.api.permissions import console_principal, role_required
from apps.api.serializers import EvidenceWindowInput, Rfc3339Field
from apps.audit.evidence import parse_window
from apps.audit.exports import (
    evidence_export_job,
    evidence_export_ready,
    evidence_export_request,
    export_file_response,
    export_is_ready,
)
from apps.audit.models import EvidenceExportJob, ExportStatus
from apps.tenancy.models import Role


class EvidenceExportJobSerializer(serializers.Serializer[EvidenceExportJob]):
    """A background evidence export: its state, and its links."""

    id = serializers.CharField(source="export_id")
    status = serializers.ChoiceField(ExportStatus.values)
    created_at = Rfc3339Field()
    finished_at = Rfc3339Field(allow_null=True)
    size = serializers.IntegerField(allow_null=True)
    sha256 = serializers.SerializerMethodField()
    error = serializers.CharField()
    url = serializers.SerializerMethodField(help_text="Poll here.")
    download_url = serializers.SerializerMethodField(help_text="Once ready.")

    class Meta:
        ref_name = "EvidenceExportJob"

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        # ``from`` and ``to`` are Python keywords: declared here, in the wire's order.
        fields = super().get_fields()
        window = {
            name: serializers.DateField(source=f"window_{name}", allow_null=True)
            for name in ("from", "to")
        }
        order = ("id", "status", "from", "to")
        return {
            **{name: {**fields, **window}[name] for name in order},
            **{name: field for name, field in fields.items() if name not in order},
        }

    @extend_schema_field({"type": "string", "nullable": True})
    def get_sha256(self, job: EvidenceExportJob) -> str | None:
        return job.sha256 or None

    @extend_schema_field(OpenApiTypes.STR)
    def get_url(self, job: EvidenceExportJob) -> str:
        return reverse("evidence-export-job", args=[job.export_id])

    @extend_schema_field({"type": "string", "nullable": True})
    def get_download_url(self, job: EvidenceExportJob) -> str | None:
        if not export_is_ready(job):
            return None
        return reverse("evidence-export-download", args=[job.export_id])


_EXPORT_ID = path_parameter("export_id", "The export's id (`exp_…`).")


class EvidenceExportRequestApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    class InputSerializer(EvidenceWindowInput):
        """The window of the synchronous export, read the same way; a ``null`` body is
        refused as any other non-object."""

        class Meta:
            ref_name = "EvidenceExportJobRequest"

        def run_validation(self, data: Any = empty) -> Any:
            if data is None:
                return self.to_internal_value(data)
            return super().run_validation(data)

    @extend_schema(
        operation_id="evidence_export_request",
        summary="Build the evidence tar in the background; answers 202 with the link to poll "
        "(auditor+)",
        tags=["dashboard"],
        description="An org has at most `EVIDENCE_EXPORTS_PER_ORG` (default 2) exports queued "
        "or running; one more is refused 409 until one of them is ready or has failed (a "
        "conflict with the org's state, not a rate: no `Retry-After` could be promised).",
        request=InputSerializer,
        responses={
            202: ok(EvidenceExportJobSerializer),
            **keyscoped_errors(
                403,
                422,
                s409=keyscoped_error(
                    "The org already has `EVIDENCE_EXPORTS_PER_ORG` exports queued or running."
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        window = parse_window(data.validated_data.get("from"), data.validated_data.get("to"))
        member = console_principal(request).membership
        job = evidence_export_request(org=member.org, window=window, requested_by=member.user)
        body = EvidenceExportJobSerializer(job).data
        response = Response(body, status=HTTPStatus.ACCEPTED)
        response["Location"] = body["url"]
        return response


class EvidenceExportJobApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    @extend_schema(
        operation_id="evidence_export_job",
        summary="A background evidence export's state (auditor+)",
        tags=["dashboard"],
        parameters=[_EXPORT_ID],
        responses={200: ok(EvidenceExportJobSerializer), **keyscoped_errors(403, 404)},
    )
    def get(self, request: Request, export_id: str) -> Response:
        job = evidence_export_job(org=console_principal(request).org, export_id=export_id)
        return Response(EvidenceExportJobSerializer(job).data)


class EvidenceExportDownloadApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    @extend_schema(
        operation_id="evidence_export_download",
        summary="A ready background evidence export's tar (auditor+)",
        tags=["dashboard"],
        parameters=[_EXPORT_ID],
        responses={
            (200, "application/x-tar"): OpenApiResponse(response=OpenApiTypes.BINARY),
            **keyscoped_errors(403, 404, 409),
        },
    )
    def get(self, request: Request, export_id: str) -> FileResponse:
        job = evidence_export_ready(org=console_principal(request).org, export_id=export_id)
        return export_file_response(job)
