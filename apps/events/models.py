"""Outbound events: per-org webhook endpoints, the events recorded, their deliveries and
members' email opt-ins.

An ``Event`` is written in the transaction of the change it reports, with one
``Delivery`` per subscribed endpoint and the delivery tasks (the task engine's queue is a
table of the same database), so a rolled-back change leaves nothing behind.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.common.encryption import EncryptedCharField
from apps.events.destinations import masked_url
from apps.tenancy.models import Org


class EventType(models.TextChoices):
    APPROVAL_OPENED = "approval.opened", "approval.opened"
    APPROVAL_WAITING = "approval.waiting_for_approvers", "approval.waiting_for_approvers"
    APPROVAL_VOTE_RECORDED = "approval.vote_recorded", "approval.vote_recorded"
    APPROVAL_DECIDED = "approval.decided", "approval.decided"
    APPROVAL_REMINDER = "approval.reminder", "approval.reminder"
    APPROVAL_ESCALATED = "approval.escalated", "approval.escalated"
    RECEIPT_REFUSED = "receipt.refused", "receipt.refused"
    POLICY_DEPLOYED = "policy.deployed", "policy.deployed"
    POLICY_BREAK_GLASS = "policy.break_glass", "policy.break_glass"
    POLICY_STALE_AGENTS = "policy.stale_agents", "policy.stale_agents"
    QUOTA_THRESHOLD = "quota.threshold", "quota.threshold"
    API_KEY_CREATED = "api_key.created", "api_key.created"
    API_KEY_REVOKED = "api_key.revoked", "api_key.revoked"
    TRANSPARENCY_ALERT = "transparency.alert", "transparency.alert"
    RECEIPTS_ARCHIVED = "receipts.archived", "receipts.archived"
    RECEIPTS_RETIRED = "receipts.retired", "receipts.retired"
    LEGAL_HOLD_SET = "legal_hold.set", "legal_hold.set"
    LEGAL_HOLD_RELEASED = "legal_hold.released", "legal_hold.released"


# Members may opt in to email for these (the "approval events").
EMAIL_EVENT_TYPES = (
    EventType.APPROVAL_OPENED,
    EventType.APPROVAL_WAITING,
    EventType.APPROVAL_VOTE_RECORDED,
    EventType.APPROVAL_DECIDED,
)


# Sent to the people they are about whoever subscribes: a reminder to the roster's members
# who have not voted, an escalation to the org's escalation list (ApprovalEscalation). Webhook
# endpoints subscribe to them as to any other type.
ADDRESSED_EVENT_TYPES = (EventType.APPROVAL_REMINDER, EventType.APPROVAL_ESCALATED)


class EndpointFormat(models.TextChoices):
    STANDARD = "standard", "Standard Webhooks JSON"
    SLACK = "slack", "Slack incoming webhook"


class WebhookEndpoint(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    endpoint_id = models.CharField(max_length=40, unique=True)
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True, default="")
    event_types = models.JSONField(default=list)
    format = models.CharField(
        max_length=16, choices=EndpointFormat.choices, default=EndpointFormat.STANDARD
    )
    enabled = models.BooleanField(default=True)
    # Standard Webhooks secrets (``whsec_`` + base64), encrypted at rest. During a rotation
    # the previous one signs too, until ``previous_secret_expires_at``.
    secret = EncryptedCharField(max_length=100)
    previous_secret = EncryptedCharField(max_length=100, blank=True, default="")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    # Failed attempts since the last success; past WEBHOOK_DISABLE_AFTER_FAILURES the
    # endpoint is disabled and the org's owners are told by email.
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["org", "enabled"], name="events_endpoint_org")]
        ordering = ["org_id", "created_at"]

    def __str__(self) -> str:
        # Shown to every reader (titles, the delivery log, the admin log): never the
        # credential a URL may carry.
        return f"{self.endpoint_id} {masked_url(self.url)}"


class Event(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    # ``webhook-id`` of every delivery of this event, on every attempt.
    event_id = models.CharField(max_length=40, unique=True)
    type = models.CharField(max_length=64, choices=EventType.choices)
    payload = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["org", "created_at"], name="events_event_org"),
            # The delivery log's retention, oldest first (events.services.delivery_log_prune).
            models.Index(fields=["created_at"], name="events_event_created"),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event_id} {self.type}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # waiting for its next attempt
    SENDING = "sending", "Sending"  # claimed by a worker until ``claimed_until``
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"  # out of attempts, or the endpoint was disabled


class Delivery(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    # Neither key has an index of its own: (endpoint, created_at) serves the endpoint, and
    # is the only index that leads with it, so the delivery log's read of an endpoint's
    # deliveries in time order has no other way in; (event, endpoint) serves the event.
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    event = models.ForeignKey(
        Event, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["event", "endpoint"], name="events_delivery_once")
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="events_delivery_due",
                condition=models.Q(status__in=["pending", "sending"]),
            ),
            # The delivery log: an endpoint's deliveries in its order whole (the id breaks
            # a tie), with the org that row-level security checks, so that a page is read
            # from the index alone, in order, and the read stops at a page; a plan made
            # for any endpoint would otherwise fetch and sort all of them.
            models.Index(
                fields=["endpoint", "-created_at", "-id"],
                name="events_delivery_endpoint",
                include=["org"],
            ),
        ]
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.event.type} to {self.endpoint}: {self.status}"


class EmailSubscription(models.Model):
    """A member's opt-in to email for one approval event type in one org."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    event_type = models.CharField(max_length=64, choices=EventType.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "user", "event_type"], name="events_email_subscription_once"
            )
        ]
        ordering = ["org_id", "user_id", "event_type"]

    def __str__(self) -> str:
        return f"{self.user} {self.event_type}"
