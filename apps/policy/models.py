"""Deployed policy: every TOML text an org ever deployed, its active pin and the history.

A ``PolicyVersion`` is immutable and identified by its hash (re-deploying the same text
re-activates the same version under its old id). ``PolicyHead`` is one row per org holding
the active version; deploys lock it, so concurrent deploys with the same expected hash
serialize and exactly one wins. ``PolicyDeployment`` is the append-only history.
``PolicyPull`` is the fleet: one row per API key, the version its last pull served.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.tenancy.models import ApiKey, Org


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
    # When the periodic check looked for agents still enforcing a replaced version,
    # POLICY_STALE_AGENT_SECONDS after this deployment (apps.policy.fleet): set once, so
    # ``policy.stale_agents`` fires at most once per deployment.
    stale_agents_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["org", "-deployed_at"], name="policy_deploy_org_time"),
            # The check's backlog: the few deployments not checked yet, across orgs.
            models.Index(
                fields=["deployed_at"],
                name="policy_deploy_unchecked",
                condition=models.Q(stale_agents_checked_at__isnull=True),
            ),
        ]
        ordering = ["-deployed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.org_id} {self.deployed_at:%Y-%m-%d %H:%M} {self.version_id}"


class PolicyPull(models.Model):
    """The latest policy pull of one API key: the hash it was served, since when it has been
    served that hash, and the SDK's ``User-Agent``. Written by the pull itself
    (``apps.policy.fleet.policy_pull_record``), at most once a minute per key while nothing
    changes, so ``pulled_at`` is the last pull to the minute."""

    api_key = models.OneToOneField(
        ApiKey, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    user_agent = models.CharField(max_length=300, blank=True, default="")
    policy_hash = models.CharField(max_length=64)
    served_since = models.DateTimeField()
    pulled_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["org", "policy_hash"], name="policy_pull_org_hash")]

    def __str__(self) -> str:
        return f"{self.api_key_id}: {self.policy_hash[:12]}"
