"""Orgs (tenants), their API keys and their console members."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from apps.common.encryption import EncryptedCharField


def validate_retention_days(days: int) -> None:
    """0 (keep for ever) or at least ``RETENTION_FLOOR_DAYS``: a form's check of what
    ``org_set_limits`` refuses too."""
    floor = settings.RETENTION_FLOOR_DAYS
    if 0 < days < floor:
        raise ValidationError(
            f"At least {floor} days (RETENTION_FLOOR_DAYS), or 0 to keep receipts for ever."
        )


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
    # Per-org override of the plan's retention of receipt bodies in the hot table, in days
    # (settings.RECEIPT_RETENTION_DAYS; 0 keeps them for ever). Never below
    # settings.RETENTION_FLOOR_DAYS except 0: org_set_limits refuses it.
    receipt_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[validate_retention_days],
        help_text="Days receipt bodies stay in the mirror before they are archived and "
        "retired; 0 keeps them for ever; empty: the plan's.",
    )
    # An approver key a member enrolls from their browser waits for an owner or manager to
    # confirm it, unless the member signed in with single sign-on and this is on (the
    # identity provider already vouches for the person holding the device).
    confirm_sso_approver_keys = models.BooleanField(
        db_default=False,
        help_text="Confirm at once the approver keys members enroll after signing in with "
        "single sign-on (otherwise an owner or manager confirms each key).",
    )
    # Co-signed deploys: how many of the org's approver keys must approve a policy change
    # before it activates (0: a deploy activates at once). Only an owner sets it.
    policy_quorum = models.PositiveSmallIntegerField(
        db_default=0,  # raw inserts (bulk loads, restores) get it too
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

    @property
    def effective_receipt_retention_days(self) -> int:
        """Days a receipt's body stays in the mirror (0: for ever): the org's override or
        its plan's default (settings.RECEIPT_RETENTION_DAYS)."""
        if self.receipt_retention_days is not None:
            return self.receipt_retention_days
        days: dict[str, int] = settings.RECEIPT_RETENTION_DAYS
        return days[self.plan]


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
    APPROVER_KEY_ENROLLED = "approver_key.enrolled", "Approver key enrolled by its member"
    APPROVER_KEY_CONFIRMED = "approver_key.confirmed", "Approver key confirmed"
    APPROVER_KEY_RELABELLED = "approver_key.relabelled", "Approver key relabelled"
    APPROVAL_ESCALATION_SET = "approval_escalation.set", "Approval escalation set"
    EVIDENCE_EXPORTED = "evidence.exported", "Evidence exported"
    CONSOLE_TOKEN_ISSUED = "console_token.issued", "Dashboard session token issued"
    WEBHOOK_ENDPOINT_ENABLED = "webhook_endpoint.enabled", "Webhook endpoint enabled"
    WEBHOOK_ENDPOINT_DISABLED = "webhook_endpoint.disabled", "Webhook endpoint disabled"
    WEBHOOK_SECRET_ROTATED = "webhook_endpoint.secret_rotated", "Webhook signing secret rotated"
    RECEIPTS_ARCHIVED = "receipts.archived", "Receipts archived"
    RECEIPTS_RETIRED = "receipts.retired", "Receipt bodies retired"
    LEGAL_HOLD_SET = "legal_hold.set", "Legal hold set"
    LEGAL_HOLD_RELEASED = "legal_hold.released", "Legal hold released"
    INVITATION_SENT = "invitation.sent", "Invitation sent"
    INVITATION_RESENT = "invitation.resent", "Invitation sent again"
    INVITATION_REVOKED = "invitation.revoked", "Invitation revoked"
    INVITATION_ACCEPTED = "invitation.accepted", "Invitation accepted"
    SSO_CONFIGURED = "sso.configured", "Single sign-on configured"
    SSO_SIGNED_IN = "sso.signed_in", "Signed in with single sign-on"
    SSO_REFUSED = "sso.refused", "Single sign-on refused"
    SCIM_TOKEN_ISSUED = "scim_token.issued", "Provisioning (SCIM) token issued"
    SCIM_TOKEN_REVOKED = "scim_token.revoked", "Provisioning (SCIM) token revoked"
    MEMBER_PROVISIONED = "member.provisioned", "Member provisioned (SCIM)"
    MEMBER_DEPROVISIONED = "member.deprovisioned", "Member deprovisioned"


class InvitationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REVOKED = "revoked", "Revoked"
    EXPIRED = "expired", "Expired"


class InvitationQuerySet(models.QuerySet["Invitation"]):
    def pending_at(self, now: datetime) -> InvitationQuerySet:
        """The invitations whose link works at ``now`` (as :meth:`Invitation.status_at`)."""
        return self.filter(accepted_at=None, revoked_at=None, link_expires_at__gt=now)


class Invitation(models.Model):
    """An invitation to join ``org`` with ``role``, sent by email to ``email``.

    Its link carries the row's id and ``nonce``, signed with the service's secret key
    (``apps.tenancy.services.invitations``): nothing secret is stored that would let a reader
    of the database forge one. Sending it again draws a new nonce, so only the latest link
    works; accepting or revoking it ends the link for good, and so does ``link_expires_at``.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Role.choices)
    nonce = models.CharField(max_length=32)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )  # fmt: skip
    inviter = models.CharField(max_length=150, blank=True, default="")  # who, in words
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField()
    sent_count = models.PositiveIntegerField(default=1)
    link_expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )  # fmt: skip
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["org", "email"], name="invitation_org_email")]

    def __str__(self) -> str:
        return f"{self.email} to {self.org} as {self.role}"

    def status_at(self, now: datetime) -> InvitationStatus:
        """The one reading of an invitation's state at ``now``."""
        if self.accepted_at is not None:
            return InvitationStatus.ACCEPTED
        if self.revoked_at is not None:
            return InvitationStatus.REVOKED
        if now >= self.link_expires_at:
            return InvitationStatus.EXPIRED
        return InvitationStatus.PENDING


class SsoConfig(models.Model):
    """An org's single sign-on to the console with OpenID Connect.

    The provider is found from ``issuer`` (its discovery document). A person may sign in
    when the provider vouches for an email in one of ``allowed_domains``; their role is the
    highest one whose group (``role_groups``: role -> group name) appears in the
    ``groups_claim`` of their claims, read at every sign-in, else ``default_role``, else the
    role of an invitation they accept, else the role they hold (only when no group maps a
    role at all); otherwise they are refused.
    """

    org = models.OneToOneField(Org, on_delete=models.CASCADE, related_name="sso")
    enabled = models.BooleanField(default=True)
    issuer = models.URLField(max_length=500)
    client_id = models.CharField(max_length=255)
    # Needed in clear to authenticate to the provider's token endpoint: encrypted at rest.
    client_secret = EncryptedCharField(max_length=255)
    # Asked of the provider; some (Okta) put groups in the claims only for a "groups" scope.
    scopes = models.CharField(max_length=200, default="openid email profile")
    allowed_domains = models.JSONField(default=list)
    groups_claim = models.CharField(max_length=100, default="groups")
    role_groups = models.JSONField(default=dict, blank=True)
    default_role = models.CharField(max_length=16, choices=Role.choices, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "single sign-on configuration"

    def __str__(self) -> str:
        return f"single sign-on of {self.org} with {self.issuer}"


class SsoIdentity(models.Model):
    """Which console user a provider's subject is, per org: linked at the first sign-in,
    so a later email change at the provider never moves the sign-in to another account."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "issuer", "subject"], name="sso_identity_one_per_subject"
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer} in org {self.org_id}"


class ScimToken(models.Model):
    """An org's bearer token for SCIM 2.0 provisioning (its identity provider holds it).
    As API keys: the prefix finds the row, the digest (HMAC-SHA256 under
    ``API_KEY_DIGEST_SECRET``) is compared in constant time, the secret is never stored."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    label = models.CharField(max_length=200, blank=True, default="")
    prefix = models.CharField(max_length=32, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "provisioning (SCIM) token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.label or 'no label'})"


class ScimUser(models.Model):
    """A person the org's identity provider provisions (a SCIM User), and their account."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    scim_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    external_id = models.CharField(max_length=255, blank=True, default="")
    user_name = models.CharField(max_length=254)
    given_name = models.CharField(max_length=150, blank=True, default="")
    family_name = models.CharField(max_length=150, blank=True, default="")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "user_name"], name="scim_user_one_name"),
            models.UniqueConstraint(fields=["org", "user"], name="scim_user_one_account"),
        ]

    def __str__(self) -> str:
        return f"{self.user_name} provisioned in org {self.org_id}"


class ScimGroup(models.Model):
    """A group the org's identity provider provisions (a SCIM Group): its members get the
    role the group's name maps to (single sign-on's group per role, else the role's name)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    scim_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    external_id = models.CharField(max_length=255, blank=True, default="")
    display_name = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "display_name"], name="scim_group_one_name")
        ]

    def __str__(self) -> str:
        return f"{self.display_name} provisioned in org {self.org_id}"


class ScimGroupMember(models.Model):
    """A provisioned person in a provisioned group (with the org, for row-level security)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    group = models.ForeignKey(ScimGroup, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(ScimUser, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "user"], name="scim_group_member_once")
        ]

    def __str__(self) -> str:
        return f"person {self.user_id} in group {self.group_id}"


class OrgAuditEvent(models.Model):
    """The org's audit trail of operator acts (keys issued, revoked and rotated, members
    added and removed, org created and limits set, policy deployed, approver keys
    registered, rotated and revoked, evidence exported, legal holds set and released),
    written by the service that makes the change, in its transaction, whoever acts:
    console, API or command. Append-only: nothing updates or deletes a row."""

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
