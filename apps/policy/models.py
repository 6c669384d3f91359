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


class ProposalStatus(models.TextChoices):
    """Where a co-signed policy change stands. Votes are taken while ``open`` and, to
    approve it after the fact, while ``break_glass``."""

    OPEN = "open", "Open: collecting approvals"
    ACTIVATED = "activated", "Activated by the quorum"
    BREAK_GLASS = "break_glass", "Activated without the quorum (break-glass)"
    REJECTED = "rejected", "Rejected by an approver"
    SUPERSEDED = "superseded", "Superseded: another version became active"


VOTING_STATUSES = (ProposalStatus.OPEN, ProposalStatus.BREAK_GLASS)


class PolicyProposal(models.Model):
    """A policy change waiting for (or approved by) ``quorum`` approver keys.

    With the org's ``policy_quorum`` above 0 every deploy path creates one instead of
    activating. Approvers vote with approval tokens over the change's statement
    (``apps.policy.cosign``); the vote path locks this row, so concurrent votes are each
    counted once and the k-th activates the version exactly once. At most one is open per
    org. A break-glass activation is one too, activated at once and still taking the votes
    that approve it after the fact.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="+")
    # The pin it replaces (None: the fail-safe empty policy); part of the signed statement.
    previous_version = models.ForeignKey(
        PolicyVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    quorum = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.OPEN
    )
    # Unified diff of the replaced text against the proposed one, as proposed.
    diff = models.TextField(blank=True, default="")
    # The replay of recent verified receipts under the proposed policy, once something
    # computes it; None until then.
    replay = models.JSONField(null=True, blank=True)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )  # fmt: skip
    proposed_via = models.CharField(max_length=16, choices=DeployChannel.choices)
    proposed_by_name = models.CharField(max_length=150, blank=True, default="")
    # Sorted b64 approver keys that may vote, frozen at the first vote (server.md §6).
    roster = models.JSONField(default=list, blank=True)
    roster_frozen_at = models.DateTimeField(null=True, blank=True)
    approved_count = models.PositiveIntegerField(default=0)
    break_glass_reason = models.TextField(blank=True, default="")
    break_glass_at = models.DateTimeField(null=True, blank=True)
    # A break-glass activation the quorum approved afterwards.
    ratified_at = models.DateTimeField(null=True, blank=True)
    deployment = models.OneToOneField(
        PolicyDeployment, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org"], name="policy_proposal_one_open",
                condition=models.Q(status="open"),
            )
        ]  # fmt: skip
        indexes = [
            models.Index(fields=["org", "-created_at"], name="policy_proposal_org_time"),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.version_id} {self.status}"

    @property
    def takes_votes(self) -> bool:
        """Open, or activated by break-glass and not yet approved or closed afterwards."""
        return self.status in VOTING_STATUSES


class PolicyProposalVote(models.Model):
    """One approver key's verified approval token on a proposal. The nonce is unique
    (never reused); one counted vote per key and proposal."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    proposal = models.ForeignKey(PolicyProposal, on_delete=models.CASCADE, related_name="votes")
    approver_public_key = models.CharField(max_length=44)
    approver_key_id = models.CharField(max_length=100)
    decision = models.CharField(max_length=16)
    nonce = models.CharField(max_length=64, unique=True)
    expiry = models.BigIntegerField()
    # The token as submitted (base64), so anyone can verify the approval offline.
    token_b64 = models.TextField()
    # The member whose session submitted it (dashboard plane, console); None for an API key.
    cast_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )  # fmt: skip
    cast_via = models.CharField(max_length=16)
    voted_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["proposal", "approver_public_key"], name="policy_vote_once_per_key"
            )
        ]
        ordering = ["voted_at", "id"]

    def __str__(self) -> str:
        return f"{self.approver_public_key[:10]}… {self.decision}"


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

    A finished replay is kept ``POLICY_REPLAY_RETENTION_DAYS`` after it finished
    (``apps.policy.services.policy_replays_prune``), except one a proposal names: the
    proposal keeps only its id, so that row is its report for as long as the proposal is.
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
    # Asked for by a policy proposal (its ``replay`` member names this row): never pruned.
    for_proposal = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set with the last write of a replay, ready or failed; null while pending or running.
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["org", "-created_at"], name="policy_replay_org_time"),
            # The retention's walk, oldest first: the finished replays no proposal names
            # (a comparison on ``finished_at`` implies it is set, with its value bound or not).
            models.Index(
                fields=["finished_at", "id"],
                name="policy_replay_finished",
                condition=models.Q(finished_at__isnull=False, for_proposal=False),
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.replay_id
