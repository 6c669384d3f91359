"""Dashboard-plane routes of outbound events: webhook endpoints (auditor+ reads, manager+
writes), their delivery logs and redelivery, the member's own email opt-ins, and
background evidence exports (auditor+)."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi
from apps.api.openapi import keyscoped_errors, ok, path_parameter, ref
from apps.api.permissions import console_principal, role_required
from apps.api.serializers import (
    NoMembersSerializer,
    Rfc3339Field,
    StrictBooleanField,
    StrictCharField,
)
from apps.common.errors import NotFound
from apps.events.delivery import rotating
from apps.events.destinations import url_shown
from apps.events.models import (
    EMAIL_EVENT_TYPES,
    Delivery,
    DeliveryStatus,
    EndpointFormat,
    EventType,
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
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_get,
    webhook_endpoint_rotate_secret,
    webhook_endpoint_update,
)
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role


class _EventTypesField(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        if not kwargs.setdefault("allow_empty", False):
            kwargs["min_length"] = 1  # documented as minItems; "empty" is still the refusal
        super().__init__(child=serializers.ChoiceField(choices=EventType.values), **kwargs)


class WebhookEndpointSerializer(serializers.Serializer[Any]):
    """A webhook endpoint as every endpoint route answers it; never its secret."""

    id = serializers.CharField(source="endpoint_id", help_text="`ep_…`")
    # Not a URLField: a masked URL ends in `…`, which is no URI.
    url = serializers.CharField(
        help_text="The URL, whole to managers and owners; to other readers scheme, host and "
        "port only, the rest `…` (a webhook URL often carries its credential)."
    )
    description = serializers.CharField()
    event_types = _EventTypesField(allow_empty=True)
    format = serializers.ChoiceField(EndpointFormat.values)
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField()
    consecutive_failures = serializers.IntegerField()
    rotating = serializers.SerializerMethodField(help_text="The previous secret still signs.")
    created_at = Rfc3339Field()

    class Meta:
        ref_name = "WebhookEndpoint"

    def to_representation(self, instance: WebhookEndpoint) -> dict[str, Any]:
        # The URL whole only to a role that may manage endpoints (context ``role``), masked
        # to any other reader: the console's rule, one function.
        data: dict[str, Any] = super().to_representation(instance)
        data["url"] = url_shown(instance.url, role=self.context.get("role"))
        return data

    @extend_schema_field(OpenApiTypes.BOOL)
    def get_rotating(self, endpoint: WebhookEndpoint) -> bool:
        return rotating(endpoint)


class WebhookEndpointWithSecretSerializer(WebhookEndpointSerializer):
    """An endpoint just created or given a new secret: the answer shows the secret, once."""

    secret = serializers.CharField(help_text="`whsec_…`: shown this once.")

    class Meta:
        ref_name = "WebhookEndpointWithSecret"


@extend_schema_field(ref("WebhookEvent"))
class _EventField(serializers.Field):  # type: ignore[type-arg]
    """The delivered event, as the webhook body carries it (Standard Webhooks envelope)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, delivery: Delivery) -> dict[str, Any]:
        event = delivery.event
        return {
            "type": event.type,
            "timestamp": Rfc3339Field().to_representation(event.created_at),
            "data": event.payload,
        }


class WebhookDeliverySerializer(serializers.Serializer[Any]):
    """One delivery of an event to an endpoint, with its attempts so far."""

    id = serializers.IntegerField(source="pk")
    event_id = serializers.CharField(source="event.event_id", help_text="The `webhook-id`.")
    event_type = serializers.ChoiceField(EventType.values, source="event.type")
    status = serializers.ChoiceField(DeliveryStatus.values)
    attempts = serializers.IntegerField()
    last_status_code = serializers.IntegerField(allow_null=True)
    last_latency_ms = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    next_attempt_at = Rfc3339Field()
    last_attempt_at = Rfc3339Field(allow_null=True)
    delivered_at = Rfc3339Field(allow_null=True)
    created_at = Rfc3339Field()
    event = _EventField()

    class Meta:
        ref_name = "WebhookDelivery"


def no_members(request: Request) -> None:
    """A route that takes nothing: no body, or an empty JSON object (read strictly)."""
    if request.body:
        NoMembersSerializer(data=request.data).is_valid(raise_exception=True)


class _ReadsFor(DashboardApi):
    """GET (and HEAD) need ``read_role``; every other method ``write_role``."""

    read_role: Role = Role.AUDITOR
    write_role: Role = Role.MANAGER

    def get_permissions(self) -> Sequence[BasePermission]:
        role = self.read_role if self.request.method in ("GET", "HEAD") else self.write_role
        return [role_required(role)()]


def _reader(request: Request) -> dict[str, Any]:
    """The serializer context naming the reader's role (which decides how a URL shows)."""
    return {"role": console_principal(request).role}


_ENDPOINT_ID = path_parameter("endpoint_id", "The endpoint's id (`ep_…`).")


class WebhookEndpointListApi(_ReadsFor):
    class InputSerializer(serializers.Serializer[Any]):
        url = serializers.URLField(max_length=2000)
        event_types = _EventTypesField()
        format = serializers.ChoiceField(
            choices=EndpointFormat.values, default=EndpointFormat.STANDARD
        )
        description = StrictCharField(max_length=200, required=False, default="",
                                      allow_blank=True)  # fmt: skip
        enabled = StrictBooleanField(required=False, default=True)

        class Meta:
            ref_name = "WebhookEndpointCreate"

    @extend_schema(
        operation_id="webhook_endpoints_list",
        summary="The org's webhook endpoints (auditor+); secrets are never listed",
        tags=["webhooks"],
        responses={200: ok(WebhookEndpointSerializer(many=True)), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        org = console_principal(request).org
        endpoints = webhook_endpoints(org=org)
        return Response(
            WebhookEndpointSerializer(endpoints, many=True, context=_reader(request)).data
        )

    @extend_schema(
        operation_id="webhook_endpoint_create",
        summary="Add a webhook endpoint (manager+); the answer shows its secret, once",
        tags=["webhooks"],
        request=InputSerializer,
        responses={201: ok(WebhookEndpointWithSecretSerializer), **keyscoped_errors(403, 422)},
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_create(
            org=console_principal(request).org, **data.validated_data
        )
        return Response(
            WebhookEndpointWithSecretSerializer(endpoint, context=_reader(request)).data,
            status=HTTPStatus.CREATED,
        )


class WebhookEndpointDetailApi(_ReadsFor):
    class InputSerializer(serializers.Serializer[Any]):
        url = serializers.URLField(max_length=2000, required=False)
        event_types = _EventTypesField(required=False)
        format = serializers.ChoiceField(choices=EndpointFormat.values, required=False)
        description = StrictCharField(max_length=200, required=False, allow_blank=True)
        enabled = StrictBooleanField(required=False)

        class Meta:
            ref_name = "WebhookEndpointUpdate"

    @extend_schema(
        operation_id="webhook_endpoint_detail",
        summary="One webhook endpoint (auditor+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        responses={200: ok(WebhookEndpointSerializer), **keyscoped_errors(403, 404)},
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        return Response(WebhookEndpointSerializer(endpoint, context=_reader(request)).data)

    @extend_schema(
        operation_id="webhook_endpoint_update",
        summary="Change a webhook endpoint; enabling it clears its failure run (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        request=InputSerializer,
        responses={200: ok(WebhookEndpointSerializer), **keyscoped_errors(403, 404, 422)},
    )
    def patch(self, request: Request, endpoint_id: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        member = console_principal(request)
        endpoint = webhook_endpoint_get(org=member.org, endpoint_id=endpoint_id)
        endpoint = webhook_endpoint_update(
            endpoint=endpoint, actor=Actor.api(user=member.membership.user),
            **data.validated_data,
        )  # fmt: skip
        return Response(WebhookEndpointSerializer(endpoint, context=_reader(request)).data)

    @extend_schema(
        operation_id="webhook_endpoint_delete",
        summary="Remove a webhook endpoint and its delivery log (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        responses={
            200: ok(WebhookEndpointSerializer, "Removed: what it was."),
            **keyscoped_errors(403, 404),
        },
    )
    def delete(self, request: Request, endpoint_id: str) -> Response:
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        body = WebhookEndpointSerializer(endpoint, context=_reader(request)).data
        webhook_endpoint_delete(endpoint=endpoint)
        return Response(body)


class WebhookEndpointRotateSecretApi(_ReadsFor):
    @extend_schema(
        operation_id="webhook_endpoint_rotate_secret",
        summary="A new signing secret, shown once; the previous one keeps signing during the "
        "overlap (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        request=NoMembersSerializer,
        responses={200: ok(WebhookEndpointWithSecretSerializer), **keyscoped_errors(403, 404, 422)},
    )
    def post(self, request: Request, endpoint_id: str) -> Response:
        no_members(request)
        member = console_principal(request)
        endpoint = webhook_endpoint_get(org=member.org, endpoint_id=endpoint_id)
        endpoint = webhook_endpoint_rotate_secret(
            endpoint=endpoint, actor=Actor.api(user=member.membership.user)
        )
        return Response(
            WebhookEndpointWithSecretSerializer(endpoint, context=_reader(request)).data
        )


class WebhookDeliveryListApi(_ReadsFor):
    @extend_schema(
        operation_id="webhook_deliveries",
        summary="The endpoint's delivery log, newest first: status, response code, latency, "
        "attempts (auditor+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        responses={200: ok(WebhookDeliverySerializer(many=True)), **keyscoped_errors(403, 404)},
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        deliveries = endpoint_deliveries(endpoint=endpoint)
        return Response(WebhookDeliverySerializer(deliveries, many=True).data)


class WebhookRedeliverApi(_ReadsFor):
    @extend_schema(
        operation_id="webhook_redeliver",
        summary="Send a delivery again now, with the same webhook-id (manager+)",
        tags=["webhooks"],
        parameters=[_ENDPOINT_ID],
        request=NoMembersSerializer,
        responses={202: ok(WebhookDeliverySerializer), **keyscoped_errors(403, 404, 422)},
    )
    def post(self, request: Request, endpoint_id: str, delivery_id: int) -> Response:
        no_members(request)
        endpoint = webhook_endpoint_get(org=console_principal(request).org, endpoint_id=endpoint_id)
        delivery = endpoint_delivery(endpoint=endpoint, delivery_id=delivery_id)
        if delivery is None:
            raise NotFound(f"no delivery {delivery_id} for this endpoint")
        delivery = delivery_redeliver(delivery=delivery)
        delivery.endpoint = endpoint
        return Response(WebhookDeliverySerializer(delivery).data, status=HTTPStatus.ACCEPTED)


class EmailSubscriptionsApi(_ReadsFor):
    read_role = Role.VIEWER
    write_role = Role.VIEWER

    class InputSerializer(serializers.Serializer[Any]):
        event_types = serializers.ListField(
            child=serializers.ChoiceField(choices=[str(value) for value in EMAIL_EVENT_TYPES]),
            allow_empty=True,
        )

        class Meta:
            ref_name = "EmailSubscriptionsRequest"

    class OutputSerializer(serializers.Serializer[Any]):
        """The signed-in member's email opt-ins in this org (approval events only)."""

        event_types = serializers.ListField(
            child=serializers.ChoiceField(choices=[str(value) for value in EMAIL_EVENT_TYPES])
        )

        class Meta:
            ref_name = "EmailSubscriptions"

    @extend_schema(
        operation_id="email_subscriptions",
        summary="Your email opt-ins for approval events in this org (viewer+)",
        tags=["webhooks"],
        responses={200: ok(OutputSerializer), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        member = console_principal(request).membership
        wanted = email_subscriptions(org=member.org, user=member.user)
        return Response(self.OutputSerializer({"event_types": wanted}).data)

    @extend_schema(
        operation_id="email_subscriptions_set",
        summary="Replace your email opt-ins (approval events only; [] opts out) (viewer+)",
        tags=["webhooks"],
        request=InputSerializer,
        responses={200: ok(OutputSerializer), **keyscoped_errors(403, 422)},
    )
    def put(self, request: Request) -> Response:
        member = console_principal(request).membership
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        wanted = email_subscriptions_set(
            org=member.org, user=member.user, event_types=data.validated_data["event_types"]
        )
        return Response(self.OutputSerializer({"event_types": wanted}).data)
