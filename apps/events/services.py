"""Writes of outbound events: recording an event (the sink every service's
``apps.common.outbound.emit`` reaches) and its fan-out into deliveries (the task that
makes them), endpoints (create, update, rotate, disable, delete), redelivery and
members' email opt-ins, and the delivery log's retention."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django_tasks import task

from apps.common.encryption import sealed
from apps.common.errors import InvalidInput, NotFound
from apps.common.outbound import PayloadFactory
from apps.common.tasks import enqueue
from apps.events.delivery import deliver_webhook
from apps.events.destinations import check_url
from apps.events.emails import send_addressed_emails, send_event_emails
from apps.events.models import (
    ADDRESSED_EVENT_TYPES,
    EMAIL_EVENT_TYPES,
    Delivery,
    DeliveryStatus,
    EmailSubscription,
    EndpointFormat,
    Event,
    EventType,
    WebhookEndpoint,
)
from apps.events.subscriptions import forget_subscribers_on_commit, subscribed_types
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org

EVENT_ID_PREFIX = "evt_"
ENDPOINT_ID_PREFIX = "ep_"
SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's marker, not a secret)


def event_record(org_id: int, event_type: str, payload: PayloadFactory) -> Event | None:
    """Record ``event_type`` and enqueue its fan-out, in the caller's transaction; nothing
    when nobody subscribes. Two inserts: the deliveries are made by the fan-out task
    (:func:`fan_out_event`), so the change's own request pays no more."""
    if event_type not in ADDRESSED_EVENT_TYPES and event_type not in subscribed_types(org_id):
        return None
    with transaction.atomic(savepoint=False):
        event = Event.objects.create(
            org_id=org_id,
            event_id=EVENT_ID_PREFIX + secrets.token_urlsafe(18),
            type=event_type,
            payload=payload(),
            created_at=timezone.now(),
        )
        enqueue(fan_out_event, event.pk)
    return event


def event_fan_out(*, event: Event) -> list[Delivery]:
    """The event's deliveries, one per enabled endpoint that wants its type (made once:
    a second run finds them), each enqueued; and its emails, when members opted in."""
    endpoints = [
        endpoint
        for endpoint in WebhookEndpoint.objects.filter(org_id=event.org_id, enabled=True)
        if event.type in endpoint.event_types
    ]
    with transaction.atomic():
        done = set(Delivery.objects.filter(event=event).values_list("endpoint_id", flat=True))
        now = timezone.now()
        deliveries = Delivery.objects.bulk_create(
            [
                Delivery(
                    org_id=event.org_id,
                    endpoint=endpoint,
                    event=event,
                    next_attempt_at=now,
                    created_at=event.created_at,
                )
                for endpoint in endpoints
                if endpoint.pk not in done
            ]
        )
        for delivery in deliveries:
            enqueue(deliver_webhook, delivery.pk)
        if not done and event.type in ADDRESSED_EVENT_TYPES:
            enqueue(send_addressed_emails, event.pk)
        if (
            not done
            and event.type in EMAIL_EVENT_TYPES
            and (
                EmailSubscription.objects.filter(
                    org_id=event.org_id, event_type=event.type
                ).exists()
            )
        ):
            enqueue(send_event_emails, event.pk)
    return deliveries


@task()
def fan_out_event(event_pk: int) -> int:
    """Make a recorded event's deliveries (and emails); how many deliveries."""
    event = Event.objects.filter(pk=event_pk).first()
    if event is None:  # its org was deleted meanwhile
        return 0
    return len(event_fan_out(event=event))


# --- endpoints ---------------------------------------------------------------------------


def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _event_types(values: Iterable[str]) -> list[str]:
    wanted = sorted(set(values))
    unknown = [value for value in wanted if value not in EventType.values]
    if unknown:
        raise InvalidInput(
            f"event_types: unknown {', '.join(unknown)}; known: {', '.join(EventType.values)}"
        )
    if not wanted:
        raise InvalidInput("event_types: name at least one event type")
    return wanted


def _format(value: str) -> str:
    if value not in EndpointFormat.values:
        raise InvalidInput(f"format: one of {', '.join(EndpointFormat.values)}")
    return value


def webhook_endpoint_create(
    *,
    org: Org,
    url: str,
    event_types: Iterable[str],
    format: str = EndpointFormat.STANDARD,
    description: str = "",
    enabled: bool = True,
) -> WebhookEndpoint:
    """A new endpoint with a fresh secret (the caller shows ``endpoint.secret`` once)."""
    url = check_url(url)  # stored as it is sent (encoded)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            org=org,
            endpoint_id=ENDPOINT_ID_PREFIX + secrets.token_urlsafe(12),
            url=url,
            event_types=_event_types(event_types),
            format=_format(format),
            description=description[:200],
            enabled=enabled,
            secret=new_secret(),
        )
        forget_subscribers_on_commit(org.pk)
    return endpoint


def webhook_endpoint_get(*, org: Org, endpoint_id: str) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(org=org, endpoint_id=endpoint_id).first()
    if endpoint is None:
        raise NotFound(f"no webhook endpoint {endpoint_id!r} in this org")
    return endpoint


def webhook_endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    url: str | None = None,
    event_types: Iterable[str] | None = None,
    format: str | None = None,
    description: str | None = None,
    enabled: bool | None = None,
    actor: Actor | None = None,
) -> WebhookEndpoint:
    """Change what was given; enabling an endpoint clears its failure run. Turning it on
    or off is recorded in the org's audit trail as ``actor``'s (when one is named)."""
    changed: list[str] = []
    if url is not None and url != endpoint.url:
        url = check_url(url)  # stored as it is sent (encoded)
        if url != endpoint.url:
            endpoint.url = url
            changed.append("url")
    if event_types is not None:
        endpoint.event_types = _event_types(event_types)
        changed.append("event_types")
    if format is not None:
        endpoint.format = _format(format)
        changed.append("format")
    if description is not None:
        endpoint.description = description[:200]
        changed.append("description")
    if enabled is not None and enabled != endpoint.enabled:
        endpoint.enabled = enabled
        changed.append("enabled")
        if enabled:
            endpoint.consecutive_failures = 0
            endpoint.disabled_reason = ""
            changed += ["consecutive_failures", "disabled_reason"]
    if changed:
        with transaction.atomic():
            endpoint.save(update_fields=changed)
            forget_subscribers_on_commit(endpoint.org_id)
            if "enabled" in changed and actor is not None:
                on = endpoint.enabled
                org_audit_record(
                    org=endpoint.org_id,
                    kind=AuditKind.WEBHOOK_ENDPOINT_ENABLED
                    if on
                    else AuditKind.WEBHOOK_ENDPOINT_DISABLED,
                    summary=f"webhook endpoint {endpoint} {'enabled' if on else 'disabled'}",
                    detail={"endpoint_id": endpoint.endpoint_id},
                    actor=actor,
                )
    return endpoint


def webhook_endpoint_rotate_secret(
    *, endpoint: WebhookEndpoint, actor: Actor | None = None
) -> WebhookEndpoint:
    """A new secret; the current one keeps signing beside it for
    WEBHOOK_SECRET_OVERLAP_SECONDS (receivers switch over without a gap). Recorded in the
    org's audit trail as ``actor``'s (when one is named)."""
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        # Moved as stored: an old secret no key decrypts any more is rotated away all the same.
        locked.previous_secret = sealed(locked, "secret")
        locked.previous_secret_expires_at = timezone.now() + timedelta(
            seconds=settings.WEBHOOK_SECRET_OVERLAP_SECONDS
        )
        locked.secret = new_secret()
        locked.save(update_fields=["secret", "previous_secret", "previous_secret_expires_at"])
        if actor is not None:
            org_audit_record(
                org=locked.org_id,
                kind=AuditKind.WEBHOOK_SECRET_ROTATED,
                summary=f"signing secret of webhook endpoint {locked} rotated",
                detail={"endpoint_id": locked.endpoint_id},
                actor=actor,
            )
    return locked


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    with transaction.atomic():
        endpoint.delete()
        forget_subscribers_on_commit(endpoint.org_id)


def delivery_redeliver(*, delivery: Delivery) -> Delivery:
    """Send a delivery again (same event, same ``webhook-id``), now, whatever its state."""
    with transaction.atomic():
        locked = Delivery.objects.select_for_update().get(pk=delivery.pk)
        locked.status = DeliveryStatus.PENDING
        locked.next_attempt_at = timezone.now()
        locked.claimed_until = None
        locked.save(update_fields=["status", "next_attempt_at", "claimed_until"])
        enqueue(deliver_webhook, locked.pk)
    return locked


# --- the delivery log's retention -------------------------------------------------------

FINISHED = (DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED)


def delivery_log_prune(*, now: datetime | None = None) -> int:
    """Delete the delivery log past ``WEBHOOK_DELIVERY_RETENTION_DAYS`` (0: kept): each
    event recorded before then whose deliveries are all finished, with its deliveries; how
    many events. A delivery still pending or sending keeps its event until it finishes.

    The log is operational (did the webhook arrive?), not the org's evidence: no legal
    hold keeps it (holds keep receipts and their evidence exports; the org's audit trail
    is never deleted).

    Bounded work per run, never a scan of the table: the oldest events first, through the
    index on ``created_at``, ``RETENTION_PRUNE_BATCH`` a transaction, at most
    ``RETENTION_PRUNE_BATCHES_PER_RUN`` transactions.
    """
    days = settings.WEBHOOK_DELIVERY_RETENTION_DAYS
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    unfinished = Delivery.objects.filter(event=OuterRef("pk")).exclude(status__in=FINISHED)
    expired = Event.objects.filter(created_at__lt=cutoff).exclude(Exists(unfinished))
    deleted = 0
    for _ in range(settings.RETENTION_PRUNE_BATCHES_PER_RUN):
        ids = list(
            expired.order_by("created_at").values_list("pk", flat=True)[
                : settings.RETENTION_PRUNE_BATCH
            ]
        )
        if not ids:
            break
        with transaction.atomic():
            Delivery.objects.filter(event_id__in=ids, status__in=FINISHED).delete()
            # A delivery sent again since the batch was read (pending now) keeps its event.
            gone, _ = (
                Event.objects.filter(pk__in=ids)
                .exclude(Exists(Delivery.objects.filter(event=OuterRef("pk"))))
                .delete()
            )
        deleted += gone
    return deleted


# --- email opt-in --------------------------------------------------------------------------


def email_subscriptions_set(*, org: Org, user: User, event_types: Iterable[str]) -> list[str]:
    """The member's email opt-ins in ``org``, replaced by ``event_types`` (approval events
    only; an empty list opts out of all)."""
    wanted = sorted(set(event_types))
    refused = [value for value in wanted if value not in EMAIL_EVENT_TYPES]
    if refused:
        raise InvalidInput(
            f"event_types: email is offered for {', '.join(EMAIL_EVENT_TYPES)} only; "
            f"not {', '.join(refused)}"
        )
    with transaction.atomic():
        EmailSubscription.objects.filter(org=org, user=user).exclude(event_type__in=wanted).delete()
        existing = set(
            EmailSubscription.objects.filter(org=org, user=user).values_list(
                "event_type", flat=True
            )
        )
        EmailSubscription.objects.bulk_create(
            [
                EmailSubscription(org=org, user=user, event_type=value)
                for value in wanted
                if value not in existing
            ]
        )
        forget_subscribers_on_commit(org.pk)
    return wanted
