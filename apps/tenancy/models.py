"""Orgs (tenants), their API keys and their console members."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models


class Plan(models.TextChoices):
    FREE = "free", "Free"
    PRO = "pro", "Pro"
    TEAM = "team", "Team"
    CUSTOM = "custom", "Custom"


class Scope(models.TextChoices):
    """What an API key may do on the SDK plane; each key lists its scopes explicitly."""

    RECEIPTS_WRITE = "receipts:write", "Push receipts"
    POLICY_READ = "policy:read", "Pull policy"
    APPROVALS_WRITE = "approvals:write", "Open and vote on approvals"
    # Registering approver keys is an administrative act: never part of the default set.
    APPROVERS_WRITE = "approvers:write", "Register approver keys"


DEFAULT_SCOPES = (Scope.RECEIPTS_WRITE, Scope.POLICY_READ, Scope.APPROVALS_WRITE)


class Role(models.TextChoices):
    """Console roles, ordered: each role can do everything the roles before it can."""

    VIEWER = "viewer", "Viewer"
    AUDITOR = "auditor", "Auditor"
    MANAGER = "manager", "Manager"
    OWNER = "owner", "Owner"

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def at_least(self, other: Role) -> bool:
        return self.rank >= other.rank


# More approvals than any org has approvers would only lock its policy.
MAX_POLICY_QUORUM = 32


class Org(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    plan = models.CharField(max_length=16, choices=Plan.choices, default=Plan.FREE)
    # Per-org override of the plan's monthly mirror soft-cap (settings.MONTHLY_RECEIPT_CAPS).
    monthly_receipt_cap = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Leave empty to use the plan's default."
    )
    # Per-org overrides of the plan's SDK-plane rate limit (settings.RATE_LIMITS).
    # At least 1 (a form refuses 0, the database too, rather than read it as "the plan's"
    # or divide by it); as in org_set_limits, None is the way back to the plan.
    rate_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Sustained requests per minute; empty: the plan's.",
    )
    rate_burst = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Requests that may arrive at once; empty: the plan's.",
    )
    # Co-signed deploys: how many of the org's approver keys must approve a policy change
    # before it activates (0: a deploy activates at once). Only an owner sets it.
    policy_quorum = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(MAX_POLICY_QUORUM)],
        help_text="Approvals a policy change needs before it activates; 0: none.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(rate_per_minute__isnull=True) | models.Q(rate_per_minute__gte=1),
                name="org_rate_per_minute_at_least_one",
            ),
            models.CheckConstraint(
                condition=models.Q(rate_burst__isnull=True) | models.Q(rate_burst__gte=1),
                name="org_rate_burst_at_least_one",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def effective_rate(self) -> tuple[int, int]:
        """(sustained requests per minute, burst) on the SDK plane: the org's override or
        its plan's default (settings.RATE_LIMITS)."""
        plan: dict[str, int] = settings.RATE_LIMITS[self.plan]
        per_minute = self.rate_per_minute or plan["per_minute"]
        burst = self.rate_burst or plan["burst"]
        return per_minute, burst

    @property
    def effective_monthly_receipt_cap(self) -> int:
        if self.monthly_receipt_cap is not None:
            return self.monthly_receipt_cap
        caps: dict[str, int] = settings.MONTHLY_RECEIPT_CAPS
        return caps[self.plan]


class ApiKey(models.Model):
    """An SDK-plane credential. The secret itself is never stored.

    ``prefix`` is the public, unique start of the key (used to find the row and shown in
    listings); ``digest`` is HMAC-SHA256 of the whole key under
    ``settings.API_KEY_DIGEST_SECRET``, compared in constant time.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="api_keys")
    label = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=32, unique=True)
    digest = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.label or 'no label'})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class Membership(models.Model):
    """A console user's role in one org."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "org"], name="membership_one_per_user_org")
        ]
        ordering = ["org_id", "user_id"]

    def __str__(self) -> str:
        return f"{self.user} in {self.org} as {self.role}"


class AuditKind(models.TextChoices):
    """What an org audit event records, one word per operator act."""

    ORG_CREATED = "org.created", "Org created"
    ORG_LIMITS_SET = "org.limits_set", "Org limits set"
    API_KEY_ISSUED = "api_key.issued", "API key issued"
    API_KEY_REVOKED = "api_key.revoked", "API key revoked"
    API_KEY_ROTATED = "api_key.rotated", "API key rotated"
    MEMBERSHIP_ADDED = "membership.added", "Member added"
    MEMBERSHIP_ROLE_CHANGED = "membership.role_changed", "Member's role changed"
    MEMBERSHIP_REMOVED = "membership.removed", "Member removed"
    POLICY_DEPLOYED = "policy.deployed", "Policy deployed"
    POLICY_QUORUM_SET = "policy.quorum_set", "Policy quorum set"
    POLICY_PROPOSED = "policy.proposed", "Policy change proposed"
    POLICY_PROPOSAL_CLOSED = "policy.proposal_closed", "Policy proposal closed"
    POLICY_BREAK_GLASS = "policy.break_glass", "Policy activated without the quorum"
    APPROVER_KEY_REGISTERED = "approver_key.registered", "Approver key registered"
    APPROVER_KEY_ROTATED = "approver_key.rotated", "Approver key rotated"
    APPROVER_KEY_REVOKED = "approver_key.revoked", "Approver key revoked"
    EVIDENCE_EXPORTED = "evidence.exported", "Evidence exported"
    CONSOLE_TOKEN_ISSUED = "console_token.issued", "Dashboard session token issued"
    WEBHOOK_ENDPOINT_ENABLED = "webhook_endpoint.enabled", "Webhook endpoint enabled"
    WEBHOOK_ENDPOINT_DISABLED = "webhook_endpoint.disabled", "Webhook endpoint disabled"
    WEBHOOK_SECRET_ROTATED = "webhook_endpoint.secret_rotated", "Webhook signing secret rotated"


class OrgAuditEvent(models.Model):
    """The org's audit trail of operator acts (keys issued, revoked and rotated, members
    added and removed, org created and limits set, policy deployed, approver keys
    registered, rotated and revoked, evidence exported), written by the service that makes
    the change, in its transaction, whoever acts: console, API or command. Append-only:
    nothing updates or deletes a row."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=64, choices=AuditKind.choices)
    summary = models.CharField(max_length=300)
    detail = models.JSONField(default=dict)
    # Who did it: a console user, an API key, or neither (a management command).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    api_key = models.ForeignKey(
        ApiKey, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    via = models.CharField(max_length=16)
    # Who, in words: the username, the API key's prefix, or a command's --actor.
    actor = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["org", "at"], name="org_audit_event_org_at")]
        ordering = ["-at", "-id"]
        verbose_name = "org audit event"

    def __str__(self) -> str:
        return f"{self.kind} at {self.at:%Y-%m-%d %H:%M:%S}"


class SessionTokenVersion(models.Model):
    """The generation of a console user's session tokens (dashboard JWTs).

    Every token carries the version current when it was issued; raising the version ends
    every token issued before, access and refresh alike (a password change, a
    deactivation, a membership removal, a refresh token used twice). No row: version 0.
    Per user across orgs, holding nothing of an org's: no row-level security.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    version = models.PositiveIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"session tokens of user {self.user_id}: version {self.version}"


class OrgSessionTokenVersion(models.Model):
    """The generation of a console user's session tokens for one org.

    A removal from an org ends only what that org granted: its version rises, and the tokens
    for that org (each carries the version current when it was issued) are refused, while
    the user's tokens for other orgs live on. Kept after the removal, so joining again never
    revives the tokens it ended. No row: version 0.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.PositiveIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "user"], name="org_session_version_one")
        ]

    def __str__(self) -> str:
        return f"session tokens of user {self.user_id} in org {self.org_id}: {self.version}"
