"""Deployed policy: every TOML text an org ever deployed, its active pin and the history.

A ``PolicyVersion`` is immutable and identified by its hash (re-deploying the same text
re-activates the same version under its old id). ``PolicyHead`` is one row per org holding
the active version; deploys lock it, so concurrent deploys with the same expected hash
serialize and exactly one wins. ``PolicyDeployment`` is the append-only history.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.tenancy.models import Org


class PolicyVersion(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    policy_id = models.CharField(max_length=32)
    policy_hash = models.CharField(max_length=64)
    toml = models.TextField()
    rule_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "policy_hash"], name="policy_version_org_hash")
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.policy_id


class PolicyHead(models.Model):
    """The org's active pin; no row (or a null version) means the fail-safe empty policy."""

    org = models.OneToOneField(Org, on_delete=models.CASCADE, primary_key=True, related_name="+")
    version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    activated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.org_id}: {self.version_id}"


class DeployChannel(models.TextChoices):
    API = "api", "Dashboard API"
    CONSOLE = "console", "Console"
    COMMAND = "command", "Management command"


class PolicyDeployment(models.Model):
    """One activation: who, when, through what, and which pin it replaced."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    previous_version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    deployed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    channel = models.CharField(max_length=16, choices=DeployChannel.choices)
    deployed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["org", "-deployed_at"], name="policy_deploy_org_time")]
        ordering = ["-deployed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.org_id} {self.deployed_at:%Y-%m-%d %H:%M} {self.version_id}"


class ReplayStatus(models.TextChoices):
    PENDING = "pending", "Queued"
    RUNNING = "running", "Running"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class PolicyReplay(models.Model):
    """A proposed policy replayed over the org's verified receipts of a window, against the
    policy active when it was asked for (``apps.policy.replay``).

    A small window is replayed in the request and stored ready; a larger one is queued
    and a worker fills ``report`` in. The window's bounds and both policies are fixed at
    the request, so the worker replays what was asked, whatever was deployed meanwhile.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    replay_id = models.CharField(max_length=40, unique=True)
    status = models.CharField(
        max_length=16, choices=ReplayStatus.choices, default=ReplayStatus.PENDING
    )
    proposed_toml = models.TextField()
    proposed_policy_hash = models.CharField(max_length=64)
    # The active pin at the request; null for the fail-safe empty policy.
    current_version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    current_policy_hash = models.CharField(max_length=64)
    days = models.PositiveSmallIntegerField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    # Receipts the window holds by the analytics rollups (whole days): what chose inline or
    # queued.
    estimated_receipts = models.BigIntegerField(default=0)
    report = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, default="")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["org", "-created_at"], name="policy_replay_org_time")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.replay_id
