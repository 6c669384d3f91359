"""Dashboard-plane routes of outbound events: webhook endpoints (auditor+ reads, manager+
writes), their delivery logs and redelivery, the member's own email opt-ins, and
background evidence exports (auditor+)."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi
from apps.audit.evidence import parse_window
from apps.common.errors import InvalidInput, NotFound
from apps.common.openapi import json_body, keyscoped_errors, list_of, ok, path_parameter
from apps.events.exports import (
    evidence_export_job,
    evidence_export_request,
    export_file_response,
)
from apps.events.models import (
    EMAIL_EVENT_TYPES,
    Delivery,
    EndpointFormat,
    EventType,
    EvidenceExportJob,
    ExportStatus,
    WebhookEndpoint,
)
from apps.events.selectors import (
    email_subscriptions,
    endpoint_deliveries,
    endpoint_delivery,
    webhook_endpoints,
)
from apps.events.services import (
    delivery_redeliver,
    email_subscriptions_set,
    signing_secrets,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_get,
    webhook_endpoint_rotate_secret,
    webhook_endpoint_update,
)
from apps.tenancy.models import Role
from apps.tenancy.permissions import console_principal, role_required


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def endpoint_body(endpoint: WebhookEndpoint, *, secret: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": endpoint.endpoint_id,
        "url": endpoint.url,
        "description": endpoint.description,
        "event_types": list(endpoint.event_types),
        "format": endpoint.format,
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason,
        "consecutive_failures": endpoint.consecutive_failures,
        "rotating": len(signing_secrets(endpoint)) > 1,
        "created_at": _iso(endpoint.created_at),
    }
    if secret:
        body["secret"] = endpoint.secret
    return body


def delivery_body(delivery: Delivery) -> dict[str, Any]:
    event = delivery.event
    return {
        "id": delivery.pk,
        "event_id": event.event_id,
        "event_type": event.type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "last_status_code": delivery.last_status_code,
        "last_latency_ms": delivery.last_latency_ms,
        "last_error": delivery.last_error,
        "next_attempt_at": _iso(delivery.next_attempt_at),
        "last_attempt_at": _iso(delivery.last_attempt_at),
        "delivered_at": _iso(delivery.delivered_at),
        "created_at": _iso(delivery.created_at),
        "event": {"type": event.type, "timestamp": _iso(event.created_at), "data": event.payload},
    }


def no_members(request: Request) -> None:
    """A route that takes nothing: no body, or an empty JSON object (read strictly)."""
    if not request.body:
        return
    data = request.data
    if isinstance(data, dict) and len(data) == 0:
        return
    raise InvalidInput("this route takes no body: send nothing or {}")


class _ReadsFor(DashboardApi):
    """GET (and HEAD) need ``read_role``; every other method ``write_role``."""

    read_role: Role = Role.AUDITOR
    write_role: Role = Role.MANAGER

    def get_permissions(self) -> Sequence[BasePermission]:
        role = self.read_role if self.request.method in ("GET", "HEAD") else self.write_role
        return [role_required(role)()]


class _EventTypesField(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=serializers.ChoiceField(choices=EventType.values), allow_empty=False, **kwargs
        )


# POSTs that take nothing: an empty JSON object (or no body).
_EMPTY_BODY = {"application/json": {"type": "object", "additionalProperties": False}}
_ENDPOINT_ID = path_parameter("endpoint_id", "The endpoint's id (`ep_…`).")


@extend_schema_view(
    get=extend_schema(
        operation_id="webhook_endpoints_list",
        summary="The org's webhook endpoints (auditor+); secrets are never listed",
        tags=["webhooks"],
        responses={200: ok(list_of("WebhookEndpoint")), **keyscoped_errors(403)},
    ),
    post=extend_schema(
        operation_id="webhook_endpoint_create",
        summary="Add a webhook endpoint (manager+); the answer shows its secret, once",
        tags=["webhooks"],
        request=json_body("WebhookEndpointCreate"),
        responses={201: ok("WebhookEndpointWithSecret"), **keyscoped_errors(403, 422)},
    ),
)
class WebhookEndpointListApi(_ReadsFor):
    class InputSerializer(serializers.Serializer[Any]):
        url = serializers.URLField(max_length=2000)
        event_types = _EventTypesField()
        format = serializers.ChoiceField(
            choices=EndpointFormat.values, default=EndpointFormat.STANDARD
        )
        description = serializers.CharField(max_length=200, required=False, default="",
                                            allow_blank=True)  # fmt: skip
        enabled = serializers.BooleanField(required=False, default=True)

    def get(self, request: Request) -> Response:
        org = console_principal(request).org
        return Response([endpoint_body(endpoint) for endpoint in webhook_endpoints(org=org)])

    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_create(
            org=console_principal(request).org, **data.validated_data
        )
        return Response(endpoint_body(endpoint, secret=True), status=HTTPStatus.CREATED)


@extend_schema_view(
    get=extend_schema(
        operation_id="webhook_endpoint_detail",
        summary="One webhook endpoint (auditor+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        responses={200: ok("WebhookEndpoint"), **keyscoped_errors(403, 404)},
    ),
    patch=extend_schema(
        operation_id="webhook_endpoint_update",
        summary="Change a webhook endpoint; enabling it clears its failure run (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        request=json_body("WebhookEndpointUpdate"),
        responses={200: ok("WebhookEndpoint"), **keyscoped_errors(403, 404, 422)},
    ),
    delete=extend_schema(
        operation_id="webhook_endpoint_delete",
        summary="Remove a webhook endpoint and its delivery log (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        responses={
            200: ok("WebhookEndpoint", "Removed: what it was."),
            **keyscoped_errors(403, 404),
        },
    ),
)
class WebhookEndpointDetailApi(_ReadsFor):
    class InputSerializer(serializers.Serializer[Any]):
        url = serializers.URLField(max_length=2000, required=False)
        event_types = _EventTypesField(required=False)
        format = serializers.ChoiceField(choices=EndpointFormat.values, required=False)
        description = serializers.CharField(max_length=200, required=False, allow_blank=True)
        enabled = serializers.BooleanField(required=False)

    def get(self, request: Request, endpoint_id: str) -> Response:
        org = console_principal(request).org
        return Response(endpoint_body(webhook_endpoint_get(org=org, endpoint_id=endpoint_id)))

    def patch(self, request: Request, endpoint_id: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        return Response(
            endpoint_body(webhook_endpoint_update(endpoint=endpoint, **data.validated_data))
        )

    def delete(self, request: Request, endpoint_id: str) -> Response:
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        body = endpoint_body(endpoint)
        webhook_endpoint_delete(endpoint=endpoint)
        return Response(body)


@extend_schema_view(
    post=extend_schema(
        operation_id="webhook_endpoint_rotate_secret",
        summary="A new signing secret, shown once; the previous one keeps signing during the "
        "overlap (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        request=_EMPTY_BODY,
        responses={200: ok("WebhookEndpointWithSecret"), **keyscoped_errors(403, 404, 422)},
    )
)
class WebhookEndpointRotateSecretApi(_ReadsFor):
    def post(self, request: Request, endpoint_id: str) -> Response:
        no_members(request)
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        return Response(
            endpoint_body(webhook_endpoint_rotate_secret(endpoint=endpoint), secret=True)
        )


@extend_schema_view(
    get=extend_schema(
        operation_id="webhook_deliveries",
        summary="The endpoint's delivery log, newest first: status, response code, latency, "
        "attempts (auditor+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        responses={200: ok(list_of("WebhookDelivery")), **keyscoped_errors(403, 404)},
    )
)
class WebhookDeliveryListApi(_ReadsFor):
    def get(self, request: Request, endpoint_id: str) -> Response:
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        return Response([delivery_body(item) for item in endpoint_deliveries(endpoint=endpoint)])


@extend_schema_view(
    post=extend_schema(
        operation_id="webhook_redeliver",
        summary="Send a delivery again now, with the same webhook-id (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        request=_EMPTY_BODY,
        responses={202: ok("WebhookDelivery"), **keyscoped_errors(403, 404, 422)},
    )
)
class WebhookRedeliverApi(_ReadsFor):
    def post(self, request: Request, endpoint_id: str, delivery_id: int) -> Response:
        no_members(request)
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        delivery = endpoint_delivery(endpoint=endpoint, delivery_id=delivery_id)
        if delivery is None:
            raise NotFound(f"no delivery {delivery_id} for this endpoint")
        delivery = delivery_redeliver(delivery=delivery)
        delivery.endpoint = endpoint
        return Response(delivery_body(delivery), status=HTTPStatus.ACCEPTED)


@extend_schema_view(
    get=extend_schema(
        operation_id="email_subscriptions",
        summary="Your email opt-ins for approval events in this org (viewer+)",
        tags=["webhooks"],
        responses={200: ok("EmailSubscriptions"), **keyscoped_errors(403)},
    ),
    put=extend_schema(
        operation_id="email_subscriptions_set",
        summary="Replace your email opt-ins (approval events only; [] opts out) (viewer+)",
        tags=["webhooks"],
        request=json_body("EmailSubscriptions"),
        responses={200: ok("EmailSubscriptions"), **keyscoped_errors(403, 422)},
    ),
)
class EmailSubscriptionsApi(_ReadsFor):
    read_role = Role.VIEWER
    write_role = Role.VIEWER

    class InputSerializer(serializers.Serializer[Any]):
        event_types = serializers.ListField(
            child=serializers.ChoiceField(choices=[str(value) for value in EMAIL_EVENT_TYPES]),
            allow_empty=True,
        )

    def get(self, request: Request) -> Response:
        member = console_principal(request).membership
        return Response({"event_types": email_subscriptions(org=member.org, user=member.user)})

    def put(self, request: Request) -> Response:
        member = console_principal(request).membership
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        wanted = email_subscriptions_set(
            org=member.org, user=member.user, event_types=data.validated_data["event_types"]
        )
        return Response({"event_types": wanted})


def export_body(job: EvidenceExportJob) -> dict[str, Any]:
    url = reverse("evidence-export-job", args=[job.export_id])
    return {
        "id": job.export_id,
        "status": job.status,
        "from": job.window_from.isoformat() if job.window_from else None,
        "to": job.window_to.isoformat() if job.window_to else None,
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
        "size": job.size,
        "sha256": job.sha256 or None,
        "error": job.error,
        "url": url,
        "download_url": (
            reverse("evidence-export-download", args=[job.export_id])
            if job.status == ExportStatus.READY
            else None
        ),
    }


_EXPORT_ID = path_parameter("export_id", "The export's id (`exp_…`).")


@extend_schema_view(
    post=extend_schema(
        operation_id="evidence_export_request",
        summary="Build the evidence tar in the background; answers 202 with the link to poll "
        "(auditor+)",
        tags=["dashboard"],
        request={
            "application/json": {
                "type": "object",
                "properties": {
                    "from": {"type": "string", "format": "date"},
                    "to": {"type": "string", "format": "date"},
                },
                "additionalProperties": False,
            }
        },
        responses={202: ok("EvidenceExportJob"), **keyscoped_errors(403, 422)},
    )
)
class EvidenceExportRequestApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    def post(self, request: Request) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise InvalidInput("the body must be a JSON object {from?, to?}")
        unknown = set(data) - {"from", "to"}
        if unknown:
            raise InvalidInput(f"unknown member(s): {', '.join(sorted(unknown))}")
        values = [data.get(name) for name in ("from", "to")]
        if any(value is not None and not isinstance(value, str) for value in values):
            raise InvalidInput("from, to: dates as strings YYYY-MM-DD")
        member = console_principal(request).membership
        job = evidence_export_request(
            org=member.org, window=parse_window(values[0], values[1]), requested_by=member.user
        )
        response = Response(export_body(job), status=HTTPStatus.ACCEPTED)
        response["Location"] = export_body(job)["url"]
        return response


@extend_schema_view(
    get=extend_schema(
        operation_id="evidence_export_job",
        summary="A background evidence export's state (auditor+)",
        tags=["dashboard"],
        parameters=[_EXPORT_ID],
        responses={200: ok("EvidenceExportJob"), **keyscoped_errors(403, 404)},
    )
)
class EvidenceExportJobApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    def get(self, request: Request, export_id: str) -> Response:
        job = evidence_export_job(org=console_principal(request).org, export_id=export_id)
        return Response(export_body(job))


@extend_schema_view(
    get=extend_schema(
        operation_id="evidence_export_download",
        summary="A ready background evidence export's tar (auditor+)",
        tags=["dashboard"],
        parameters=[_EXPORT_ID],
        responses={
            (200, "application/x-tar"): OpenApiResponse(response=OpenApiTypes.BINARY),
            **keyscoped_errors(403, 404, 409),
        },
    )
)
class EvidenceExportDownloadApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    def get(self, request: Request, export_id: str) -> FileResponse:
        job = evidence_export_job(org=console_principal(request).org, export_id=export_id)
        if job.status != ExportStatus.READY:
            raise ExportNotReady(f"the export is {job.status}, not ready")
        return export_file_response(job)


class ExportNotReady(InvalidInput):
    status = HTTPStatus.CONFLICT
    code = "conflict"
