"""Outbound events: per-org webhook endpoints, the events recorded, their deliveries,
members' email opt-ins, background evidence exports and the periodic scheduler's slots.

An ``Event`` is written in the transaction of the change it reports, with one
``Delivery`` per subscribed endpoint and the delivery tasks (the task engine's queue is a
table of the same database), so a rolled-back change leaves nothing behind.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.events.destinations import masked_url
from apps.tenancy.models import Org


class EventType(models.TextChoices):
    APPROVAL_OPENED = "approval.opened", "approval.opened"
    APPROVAL_WAITING = "approval.waiting_for_approvers", "approval.waiting_for_approvers"
    APPROVAL_VOTE_RECORDED = "approval.vote_recorded", "approval.vote_recorded"
    APPROVAL_DECIDED = "approval.decided", "approval.decided"
    RECEIPT_REFUSED = "receipt.refused", "receipt.refused"
    POLICY_DEPLOYED = "policy.deployed", "policy.deployed"
    QUOTA_THRESHOLD = "quota.threshold", "quota.threshold"
    API_KEY_CREATED = "api_key.created", "api_key.created"
    API_KEY_REVOKED = "api_key.revoked", "api_key.revoked"
    TRANSPARENCY_ALERT = "transparency.alert", "transparency.alert"


# Members may opt in to email for these (the "approval events").
EMAIL_EVENT_TYPES = (
    EventType.APPROVAL_OPENED,
    EventType.APPROVAL_WAITING,
    EventType.APPROVAL_VOTE_RECORDED,
    EventType.APPROVAL_DECIDED,
)


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
    # Standard Webhooks secrets (``whsec_`` + base64). During a rotation the previous one
    # signs too, until ``previous_secret_expires_at``.
    secret = models.CharField(max_length=100)
    previous_secret = models.CharField(max_length=100, blank=True, default="")
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
        indexes = [models.Index(fields=["org", "created_at"], name="events_event_org")]
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
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
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
            models.UniqueConstraint(fields=["endpoint", "event"], name="events_delivery_once")
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                name="events_delivery_due",
                condition=models.Q(status__in=["pending", "sending"]),
            ),
            models.Index(fields=["endpoint", "-created_at"], name="events_delivery_endpoint"),
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


class ExportStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class EvidenceExportJob(models.Model):
    """An evidence export built in the background (the request answers 202 and a link)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    export_id = models.CharField(max_length=40, unique=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    window_from = models.DateField(null=True, blank=True)
    window_to = models.DateField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=ExportStatus.choices, default=ExportStatus.PENDING
    )
    file_name = models.CharField(max_length=300, blank=True, default="")
    size = models.PositiveBigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["org", "-created_at"], name="events_export_org")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.export_id} {self.status}"


class PeriodicSlot(models.Model):
    """One periodic task's run for one time slot: the scheduler inserts the slot and
    enqueues only when the insert succeeds, so any number of schedulers enqueue it once."""

    name = models.CharField(max_length=64)
    slot = models.BigIntegerField()  # the slot's start, seconds since the epoch
    enqueued_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "slot"], name="events_periodic_slot_once")
        ]

    def __str__(self) -> str:
        return f"{self.name}@{self.slot}"


class TaskWorker(models.Model):
    """A running ``manage.py run_worker`` process, seen alive at ``seen_at``.

    Its heartbeat renews ``seen_at`` every third of ``TASK_WORKER_LEASE_SECONDS``; a task
    still marked running by a worker not seen for a whole lease was abandoned (the process
    was killed, or lost the database for that long) and is handed to another worker."""

    worker_id = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    queues = models.JSONField(default=list)
    # The ids of the tasks it was running at its last heartbeat.
    running = models.JSONField(default=list)
    started_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["worker_id"]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.hostname}:{self.pid})"
