"""Reads of outbound events (each takes the org explicitly)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from apps.events.models import Delivery, EmailSubscription, WebhookEndpoint
from apps.events.payloads import standard_body
from apps.tenancy.models import Org


def webhook_endpoints(*, org: Org) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(org=org).order_by("created_at")


def endpoint_deliveries(*, endpoint: WebhookEndpoint, limit: int = 100) -> list[Delivery]:
    return list(
        Delivery.objects.filter(org_id=endpoint.org_id, endpoint=endpoint)
        .select_related("event")
        .order_by("-created_at", "-id")[:limit]
    )


def endpoint_delivery(*, endpoint: WebhookEndpoint, delivery_id: int) -> Delivery | None:
    return (
        Delivery.objects.filter(org_id=endpoint.org_id, endpoint=endpoint, pk=delivery_id)
        .select_related("event")
        .first()
    )


def email_subscriptions(*, org: Org, user: Any) -> list[str]:
    return sorted(
        EmailSubscription.objects.filter(org=org, user=user).values_list("event_type", flat=True)
    )


def delivery_body(delivery: Delivery) -> str:
    return standard_body(delivery.event)
