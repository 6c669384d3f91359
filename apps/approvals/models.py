"""Human approvals: approver keys, approvals keyed by the suspended action, votes, history.

One ``Approval`` per (org, ``action_hash``). Its roster is frozen when it opens
(server.md §6); every vote and transition is written in the transaction that locks the
approval row, so concurrent votes never lose or double-count and the threshold-crossing
vote resolves it exactly once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from apps.common.vocabulary import ON_TIMEOUT
from apps.tenancy.models import Org


class ApproverKeyState(models.TextChoices):
    """Where a key stands. Only an ``active`` key is eligible to approve (server.md §6)."""

    PENDING = "pending", "Pending confirmation"
    ACTIVE = "active", "Active"
    REVOKED = "revoked", "Revoked"


class ApproverKeyQuerySet(models.QuerySet["ApproverKey"]):
    def active(self) -> ApproverKeyQuerySet:
        """Confirmed and not revoked: the keys whose votes count."""
        return self.filter(revoked_at__isnull=True, confirmed_at__isnull=False)

    def pending(self) -> ApproverKeyQuerySet:
        """Enrolled by a member, waiting for an owner or manager to confirm them."""
        return self.filter(revoked_at__isnull=True, confirmed_at__isnull=True)


class ApproverKey(models.Model):
    """An approver's Ed25519 public key (canonical padded base64 of 32 bytes).

    Registered by an administrator (console, command, ``approvers:write`` API key) it is
    active at once; enrolled by a member from their browser it is bound to that member and
    pending until an owner or manager confirms it (or the org confirms the keys of members
    who signed in with single sign-on)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    key_id = models.CharField(max_length=100)
    public_key = models.CharField(max_length=44)
    label = models.CharField(max_length=200, blank=True, default="")
    # The person holding the key (the device's owner): set when a member enrolls it, or by
    # an administrator; empty for keys registered for a script.
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )  # fmt: skip
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_via = models.CharField(max_length=16, default="command")
    created_at = models.DateTimeField(auto_now_add=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+",
    )  # fmt: skip
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApproverKeyQuerySet.as_manager()

    class Meta:
        constraints = [
            # A key id names one active key; a rotation revokes the old key under that id.
            models.UniqueConstraint(
                fields=["org", "key_id"],
                name="approver_key_org_active_id",
                condition=models.Q(revoked_at__isnull=True),
            ),
            models.UniqueConstraint(fields=["org", "public_key"], name="approver_key_org_pub"),
        ]
        indexes = [
            models.Index(
                fields=["org", "member"],
                name="approver_key_org_member",
                condition=models.Q(member__isnull=False),
            )
        ]
        ordering = ["org_id", "key_id"]

    def __str__(self) -> str:
        return f"{self.key_id} ({self.public_key[:10]}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and self.confirmed_at is not None

    @property
    def state(self) -> ApproverKeyState:
        if self.revoked_at is not None:
            return ApproverKeyState.REVOKED
        if self.confirmed_at is None:
            return ApproverKeyState.PENDING
        return ApproverKeyState.ACTIVE


# Which keys count on an approval (server.md §6), in the words every page, the README and
# the documentation use (tests/approvals/test_roster_rule_wording.py holds them to it).
ROSTER_RULE = (
    "An approval's eligible approvers are the org's approver keys that are active (confirmed "
    "and not revoked) when a vote is cast, narrowed to the approver keys the suspended action "
    "lists when it lists any. The roster freezes at the first counted vote and never changes "
    "afterwards: a key enrolled or confirmed after an approval opened counts on it until that "
    "first vote, not after. An approval opens even with no approver keys yet and waits for them."
)


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"  # team-path only: past expiresAt with nobody deciding
    # Closed by the agent's own decision link that no registered approver key signed (a
    # heso.gated session deciding locally): no human approval is recorded, no vote is taken.
    DECIDED_LOCALLY = "decided_locally", "Decided locally (unsigned)"


class ApprovalFlag(models.TextChoices):
    """Set once the expiry passed without a decision while the approval stays pending: the
    service never approves on its own, so ``escalate`` and ``auto_approve`` only flag it."""

    ESCALATED = "escalated", "Escalated"
    AUTO_APPROVE_REFUSED = "auto_approve_refused", "Auto-approve refused"


# Where ``approval_with_votes`` (selectors) puts an approval's counted votes.
COUNTED_VOTES_ATTR = "prefetched_counted_votes"
# A vote counts unless an explicit open set it aside (it stays in the history).
COUNTED_VOTE = models.Q(set_aside_at__isnull=True)


class ApprovalQuerySet(models.QuerySet["Approval"]):
    def overdue_at(self, now: datetime) -> ApprovalQuerySet:
        """Pending approvals whose signed expiry has passed at ``now``: the sweep's work."""
        return self.filter(status=ApprovalStatus.PENDING, expires_at__lt=now)

    def expiry_unstored_at(self, now: datetime) -> ApprovalQuerySet:
        """The overdue approvals whose expiry outcome is not stored yet: the sweep's backlog
        at ``now``. An approval left pending and flagged (``escalate``, ``auto_approve``) has
        nothing more to store, so however old it grows it is not in it; read per org by the
        ``approval_org_expiry`` index, this costs the sweep's lag, not the org's history."""
        return self.overdue_at(now).filter(flag="")


class Approval(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    approval_id = models.CharField(max_length=40, unique=True)
    action_hash = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    threshold = models.PositiveIntegerField(default=1)
    # Sorted b64 keys, frozen at the first counted vote (quorum legs sign over it); until
    # then the eligible approvers are the org's active keys, narrowed by the signed list.
    roster = models.JSONField(default=list)
    roster_frozen_at = models.DateTimeField(null=True, blank=True)
    # The suspend ticket the SDK hands its user for this suspension (server.md §6): the
    # content hash with an empty agent_identity. "" until the content is known.
    ticket_hash = models.CharField(max_length=64, blank=True, default="")
    rule_id = models.CharField(max_length=200, blank=True, default="")
    workflow = models.CharField(max_length=200, blank=True, default="")
    account = models.CharField(max_length=200, blank=True, default="")
    # Operator keys of the suspended receipt's envelope, where the opener had it (nobody
    # approves their own action, even when the receipt is opened and never mirrored).
    producer_keys = models.JSONField(default=list, blank=True)
    # Display context from the opener (matched_conditions, scope); never used to decide.
    context = models.JSONField(default=dict, blank=True)
    # The suspended receipt's content as JSON text (from the mirror, or the first vote).
    suspended_content = models.TextField(blank=True, default="")
    # The policy the suspension was decided under (its signed ``suspension.policy.policy_hash``,
    # receipts.md §2.5); "" when the content is not known or signs none. The console's
    # fleet view compares it with the active policy.
    policy_hash = models.CharField(max_length=64, blank=True, db_default="")
    approved_count = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    # What the suspended receipt's signed terms say happens at expiry; "" when it signed none.
    on_timeout = models.CharField(
        max_length=16, blank=True, default="", choices=[(word, word) for word in ON_TIMEOUT]
    )
    flag = models.CharField(max_length=32, blank=True, default="", choices=ApprovalFlag.choices)
    # Team-path: digest of the one-time approver-page token; opaque routing hint.
    access_token_digest = models.CharField(max_length=64, blank=True, default="")
    routing_hint = models.CharField(max_length=200, blank=True, default="")
    # Opened by a suspended push with defaults; the first explicit open may still set the
    # threshold and rule (nobody can have voted yet).
    provisional = models.BooleanField(default=False)
    # The suspended content's chain position: how a session's later lifecycle links (the
    # decision, the completion) find the approval they answer. Bounded like the mirror's.
    session_id = models.CharField(max_length=200, blank=True, default="")
    session_seq = models.BigIntegerField(null=True, blank=True)
    # The kind of the unsigned lifecycle link that closed it (status decided_locally):
    # approved, denied, expired or completed; "" otherwise.
    local_decision = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # Escalation (ApprovalEscalation): when the roster was last reminded, and when the
    # approval was escalated (once). Written under the row lock by approvals_escalate.
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)

    objects = ApprovalQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "action_hash"], name="approval_org_action")
        ]
        indexes = [
            models.Index(
                fields=["org", "ticket_hash"],
                name="approval_org_ticket",
                condition=~models.Q(ticket_hash=""),
            ),
            models.Index(fields=["org", "status", "created_at"], name="approval_org_status"),
            # The console's "recently decided": an org's last decisions, newest first (the
            # id breaks a tie: decisions of one instant are not all read to order them).
            # Partial: ``resolved_at IS NOT NULL`` is written out in every plan that reads it.
            models.Index(
                fields=["org", "resolved_at", "id"],
                name="approval_org_resolved",
                condition=models.Q(resolved_at__isnull=False),
            ),
            models.Index(
                fields=["org", "session_id", "session_seq"],
                name="approval_org_session",
                condition=~models.Q(session_id=""),
            ),
            # The approver page's one-time token (console migration 0001's function). Not
            # partial: that function's plan is made for any digest, so it could not prove
            # a condition on the column.
            models.Index(fields=["access_token_digest"], name="approval_token_digest"),
            models.Index(
                fields=["expires_at"],
                name="approval_pending_expiry",
                condition=models.Q(status="pending"),
            ),
            # An org's sweep backlog (``expiry_unstored_at``), which the dashboard's counters
            # add to the rollups. Not partial: a generic plan compares the status and flag as
            # parameters, which cannot prove a partial index's condition.
            models.Index(
                fields=["org", "status", "flag", "expires_at"], name="approval_org_expiry"
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.approval_id} {self.status}"

    # --- The approval at time t: the one home of the expiry rule (server.md §6) ------------
    # Every reader (both profiles' views, the console, the vote path, the sweep) asks these;
    # tests/approvals/test_expiry_home.py fails if an ``expires_at`` comparison appears
    # anywhere else.

    def expiry_passed_at(self, now: datetime) -> bool:
        """Whether the signed expiry has passed at ``now`` (its own instant still counts as
        before it); never, without an expiry."""
        return self.expires_at is not None and now > self.expires_at

    def time_left_at(self, now: datetime) -> timedelta | None:
        """How long it still takes votes at ``now`` (zero once past its expiry); None
        without an expiry."""
        if self.expires_at is None:
            return None
        return max(self.expires_at - now, timedelta(0))

    def reminder_due_at(self, now: datetime, every: timedelta) -> bool:
        """Whether the roster is due a reminder at ``now``: still taking votes, and
        ``every`` has passed since the last reminder (or since it opened). Never more than
        one a period, none once it is settled or past its expiry."""
        if not self.takes_votes_at(now):
            return False
        return now - (self.reminded_at or self.created_at) >= every

    def escalation_due_at(self, now: datetime, before: timedelta) -> bool:
        """Whether it is due its one escalation at ``now``: still taking votes, not escalated
        yet, and within ``before`` of its signed expiry (none without an expiry)."""
        if not self.takes_votes_at(now) or self.escalated_at is not None:
            return False
        return self.expires_at is not None and now >= self.expires_at - before

    def takes_votes_at(self, now: datetime) -> bool:
        """Pending and not past its signed expiry. Past it, votes are refused whatever
        ``on_timeout`` says, even while an escalated approval stays pending; an approval the
        agent decided locally, or one settled, takes none."""
        return self.status == ApprovalStatus.PENDING and not self.expiry_passed_at(now)

    def expired_unsettled_at(self, now: datetime) -> bool:
        """Past its expiry without having been settled before it: what refuses a late vote
        (410) once the lock applied the expiry, rather than calling it settled (409)."""
        if self.expires_at is None or now <= self.expires_at:
            return False
        return self.resolved_at is None or self.resolved_at >= self.expires_at

    def expiry_outcome(self, now: datetime) -> dict[str, object] | None:
        """The fields the expiry changes (``status``, ``resolved_at``, ``flag``) once it has
        passed at ``now``, or None while it has not (or nothing changes). An approval that
        ends by expiring ended at its expiry, whenever that is noticed (a read, the sweep,
        a late vote), so every reader sees the same answer. Pure: nothing is written."""
        if self.status != ApprovalStatus.PENDING or not self.expiry_passed_at(now):
            return None
        if self.on_timeout == "deny":
            return {
                "status": ApprovalStatus.REJECTED,
                "resolved_at": self.expires_at,
                "flag": self.flag,
            }
        if self.on_timeout in ("escalate", "auto_approve"):
            # Nobody signed, so the service never approves on its own: it stays pending.
            flag = (
                ApprovalFlag.ESCALATED
                if self.on_timeout == "escalate"
                else ApprovalFlag.AUTO_APPROVE_REFUSED
            )
            if self.flag == flag:
                return None
            return {"status": self.status, "resolved_at": self.resolved_at, "flag": flag}
        return {"status": ApprovalStatus.EXPIRED, "resolved_at": self.expires_at, "flag": self.flag}

    @property
    def api_status(self) -> str:
        """The status the APIs report, within the values each profile documents
        (``pending``, ``approved``, ``rejected``; team-path also ``expired``): an approval
        the agent closed with its own unsigned decision reports ``rejected`` (no human
        approval is recorded and no vote will be taken), its ``local_decision`` beside it."""
        if self.status == ApprovalStatus.DECIDED_LOCALLY:
            return ApprovalStatus.REJECTED.value
        return str(self.status)

    def outcome_at(self, now: datetime) -> str:
        """Team-path's ``ApprovalOutcome`` at ``now``: the status as the APIs report it,
        except that an approval no counted vote decided is ``expired`` once past
        ``expiresAt`` (whatever its ``on_timeout``: server.md §6). A vote set aside decides
        nothing."""
        if self.status == ApprovalStatus.DECIDED_LOCALLY:
            return self.api_status
        decided = self.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED)
        if decided and self.counted_vote_list():
            return self.api_status
        if self.expiry_passed_at(now):
            return ApprovalStatus.EXPIRED.value
        return str(self.status)

    def decision_at(self, now: datetime) -> str | None:
        """The settled outcome at ``now`` (``outcome_at``), or None while it is pending."""
        outcome = self.outcome_at(now)
        return None if outcome == ApprovalStatus.PENDING else outcome

    def deciding_approver_at(self, now: datetime) -> str | None:
        """The key whose counted vote settled it; None while pending or once expired, and
        when no vote decided it (closed locally by the agent)."""
        votes = self.counted_vote_list()
        if not votes or self.outcome_at(now) in (ApprovalStatus.PENDING, ApprovalStatus.EXPIRED):
            return None
        return votes[-1].approver_public_key

    def voter_state_at(self, now: datetime) -> str:
        """What the approver page says of it at ``now``: ``pending`` while it takes votes;
        a pending approval past its expiry (escalated, or waiting for the sweep) is what it
        is to a voter, ``expired``; otherwise its status."""
        if self.status == ApprovalStatus.PENDING and self.expiry_passed_at(now):
            return ApprovalStatus.EXPIRED.value
        return str(self.status)

    def counted_vote_list(self) -> list[ApprovalVote]:
        """The votes that count, in vote order: every vote but those set aside when an
        explicit open changed the terms they were cast under. Read once per record where a
        selector prefetched them (``approval_with_votes``); queried otherwise."""
        prefetched: list[ApprovalVote] | None = self.__dict__.get(COUNTED_VOTES_ATTR)
        if prefetched is not None:
            return prefetched
        return list(self.counted_votes())

    def counted_votes(self) -> models.QuerySet[ApprovalVote]:
        """The counted votes as a query (the vote path filters it under the row lock)."""
        return self.votes.filter(COUNTED_VOTE)

    @property
    def lane(self) -> str:
        """``single`` (approvals.md §5 payload) or ``quorum`` (§6), fixed at open."""
        return "single" if self.threshold == 1 else "quorum"


class VoteDecision(models.TextChoices):
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class ApprovalVote(models.Model):
    """One verified approval token; the nonce is unique service-wide (replay protection)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="votes")
    approver_key = models.ForeignKey(ApproverKey, on_delete=models.PROTECT, related_name="+")
    approver_public_key = models.CharField(max_length=44)
    decision = models.CharField(max_length=16, choices=VoteDecision.choices)
    nonce = models.CharField(max_length=64, unique=True)
    # The approver's leg, stored verbatim (approvals.md §8): record text and co-signature.
    record = models.TextField(blank=True, default="")
    co_sig_b64 = models.CharField(max_length=100, blank=True, default="")
    reason = models.TextField(blank=True, default="")  # display only, as the approver gave it
    voted_at = models.DateTimeField()
    # A vote cast on a provisional approval under terms the explicit open then changed: kept
    # (its nonce stays spent, the history says why), never counted; its key may vote again.
    set_aside_at = models.DateTimeField(null=True, blank=True)
    set_aside_reason = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["approval", "approver_public_key"],
                name="approval_vote_once_per_key",
                condition=models.Q(set_aside_at__isnull=True),
            )
        ]
        ordering = ["voted_at", "id"]

    def __str__(self) -> str:
        return f"{self.approver_public_key[:10]}… {self.decision}"


class ApprovalEvent(models.Model):
    """The approval's history: opened, each vote, resolution, expiry, flags."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32)
    detail = models.JSONField(default=dict)
    at = models.DateTimeField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} at {self.at:%Y-%m-%d %H:%M:%S}"


class ApprovalRollup(models.Model):
    """One org's approvals on one day (UTC): the dashboard's approval counters, read without
    counting the org's approvals.

    Kept by the database itself: a trigger on ``approvals_approval`` (migration 0009) moves
    a row's contribution in the transaction of every INSERT, UPDATE and DELETE of an
    approval, whatever wrote it (a service, the console, a data migration, SQL). That is why
    it is a trigger rather than a call in each service (a write path that forgot the call
    would drift silently) or a fold from a cursor (approval rows change in place, so no
    column orders their committed changes as ``seq`` orders the mirror's). It is exact under
    concurrency: each transition already holds its approval's row lock, the rollup row is
    changed by an increment (``n = n + delta``) under that row's own lock, increments
    commute, and a rolled-back transaction takes its increments with it. The price: an org's
    approval transitions of one day take that day's row in turn, each until it commits
    (they are human-paced, and an org's pushes already take its head row in turn).

    An approval contributes, by its stored row:

    - ``opened``: 1 on the day it was created;
    - once settled, 1 in the column of its status (``approved``, ``rejected``, ``expired``,
      ``decided_locally``) on the day it was resolved (created, if it has no time);
    - approved or rejected with a time: 1 in ``decided`` and its time from opening to
      decision in ``decision_micros`` (microseconds, never below 0: an approval opened
      already past its expiry was decided at once), on the same day.

    So the org's pending approvals are ``opened`` less the settled columns, over all days.
    An expiry not stored yet (the sweep's backlog) is added at read time
    (``apps.approvals.selectors.approval_days``) with the model's own rule.
    :func:`apps.approvals.selectors.approval_contribution` is the same rule in Python.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    opened = models.BigIntegerField(default=0)
    approved = models.BigIntegerField(default=0)
    rejected = models.BigIntegerField(default=0)
    expired = models.BigIntegerField(default=0)
    decided_locally = models.BigIntegerField(default=0)
    decided = models.BigIntegerField(default=0)
    decision_micros = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "day"], name="approval_rollup_org_day")
        ]

    def __str__(self) -> str:
        return f"{self.org_id} {self.day}: {self.opened} opened"


class ApprovalEscalation(models.Model):
    """How an org chases its pending approvals: remind the roster every
    ``remind_every_minutes``, and ``escalate_before_minutes`` before the signed expiry send
    ``approval.escalated`` to the escalation list (``escalate_to``: member user ids, by
    email; webhook endpoints subscribe to the event type as to any other).

    Keyed by the approval's rule id; the row with ``rule_id`` ``""`` is the org's default.
    The policy file cannot carry it: the rule grammar is fixed (policy.md §2: other keys are
    ignored by the SDK and would change the policy hash for nothing)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    rule_id = models.CharField(
        max_length=200, blank=True, default="",
        help_text="The approval rule this applies to; empty: every rule without its own.",
    )  # fmt: skip
    remind_every_minutes = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Remind the approvers on the roster who have not voted; empty: never.",
    )  # fmt: skip
    escalate_before_minutes = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Escalate this long before the approval expires; empty: never.",
    )  # fmt: skip
    escalate_to = models.JSONField(
        default=list, blank=True,
        help_text="User ids of the members emailed on escalation.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "rule_id"], name="approval_escalation_rule"),
            models.CheckConstraint(
                condition=models.Q(remind_every_minutes__isnull=True)
                | models.Q(remind_every_minutes__gte=1),
                name="approval_escalation_remind_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(escalate_before_minutes__isnull=True)
                | models.Q(escalate_before_minutes__gte=1),
                name="approval_escalation_before_positive",
            ),
        ]
        ordering = ["org_id", "rule_id"]

    def __str__(self) -> str:
        return f"escalation for {self.rule_id or 'every rule'}"
