"""Evidence exports built in the background.

The table was made by the ``events`` app, where the job used to live; it keeps its name
(``db_table``) and its row-level security (migration events 0002), so moving the model
here moved no data (migration audit 0002 and events 0006 change Django's state only).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from django.conf import settings
from django.db import models

from apps.tenancy.models import Org


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
        db_table = "events_evidenceexportjob"
        indexes = [
            models.Index(fields=["org", "-created_at"], name="events_export_org"),
            # The retention's walk over finished exports, oldest first (apps.audit.exports).
            models.Index(
                fields=["finished_at", "id"],
                name="audit_export_finished",
                condition=models.Q(status__in=["ready", "failed"]),
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.export_id} {self.status}"


class ArchiveState(models.TextChoices):
    """Where an org-month's archive stands; each step is idempotent and only ever moves
    forward, so a retry after a crash resumes from the state it finds."""

    PENDING = "pending", "Pending (being written)"
    WRITTEN = "written", "Written (not yet verified)"
    VERIFIED = "verified", "Verified (bodies not yet retired)"
    RETIRED = "retired", "Retired (bodies removed from the mirror)"


class ReceiptArchive(models.Model):
    """One org's receipts of one closed month (UTC), archived past the org's retention: an
    evidence tar (the format of ``export_evidence``, with the receipts' proofs) in the
    archive storage (``STORAGES["archive"]``), read back and verified before the month's
    bodies were retired from the mirror. The entries ``first_seq`` … ``last_seq`` are the
    month's; a retired entry's body is found here by its ``seq``."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    month = models.DateField(help_text="The first day of the month (UTC).")
    first_seq = models.BigIntegerField()
    last_seq = models.BigIntegerField()
    receipts = models.BigIntegerField()
    state = models.CharField(
        max_length=16, choices=ArchiveState.choices, default=ArchiveState.PENDING
    )
    # Where: the file's name in the archive storage, and the storage's description of it.
    storage_name = models.CharField(max_length=500, blank=True, default="")
    location = models.CharField(max_length=1000, blank=True, default="")
    # The version written, in a versioned bucket: every read takes it (apps.audit.storage).
    storage_version = models.CharField(max_length=1024, blank=True, default="")
    size = models.PositiveBigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    # The object lock found on the stored version when it was verified (a bucket's).
    lock_mode = models.CharField(max_length=16, blank=True, default="")
    locked_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    written_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "month"], name="audit_archive_org_month"),
            models.CheckConstraint(
                condition=models.Q(first_seq__gte=1)
                & models.Q(last_seq__gte=models.F("first_seq")),
                name="audit_archive_seq_range",
            ),
        ]
        indexes = [models.Index(fields=["org", "last_seq"], name="audit_archive_org_seq")]
        ordering = ["org_id", "month"]
        verbose_name = "receipt archive"

    def __str__(self) -> str:
        return f"{self.month:%Y-%m}, receipts #{self.first_seq}-{self.last_seq}"

    def covers(self, seq: int) -> bool:
        return self.first_seq <= seq <= self.last_seq


class HoldScope(models.TextChoices):
    ORG = "org", "The whole org"
    RANGE = "range", "A date range"
    SESSION = "session", "An agent session"


class LegalHold(models.Model):
    """A legal hold: while active (not released), what it covers is kept whatever the
    retention says (receipt bodies are not retired, evidence exports of it are not deleted).

    It covers the whole org, the receipts received on the days ``range_start`` to
    ``range_end`` (UTC, both inclusive; an absent bound is open), or every receipt of one
    agent session. Set and released by an owner (or an operator at the command line);
    released, never deleted, so the org keeps the record of every hold it had. Which holds
    cover what: :func:`apps.audit.selectors.legal_holds_blocking`.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    hold_id = models.CharField(max_length=40, unique=True)
    scope = models.CharField(max_length=16, choices=HoldScope.choices)
    range_start = models.DateField(null=True, blank=True)
    range_end = models.DateField(null=True, blank=True)
    session_id = models.CharField(max_length=200, blank=True, default="")
    reason = models.CharField(max_length=500)
    set_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Who, in words (the username, or a command's --actor): kept when the user is deleted.
    set_by_name = models.CharField(max_length=150, blank=True, default="")
    set_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    released_by_name = models.CharField(max_length=150, blank=True, default="")
    release_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        constraints = [
            # What each scope names, and nothing else: the database refuses a hold whose
            # coverage could be read two ways.
            models.CheckConstraint(
                name="legal_hold_scope_members",
                condition=(
                    models.Q(
                        scope=HoldScope.ORG,
                        range_start__isnull=True,
                        range_end__isnull=True,
                        session_id="",
                    )
                    | (
                        models.Q(scope=HoldScope.RANGE, session_id="")
                        & (models.Q(range_start__isnull=False) | models.Q(range_end__isnull=False))
                        & (
                            models.Q(range_start__isnull=True)
                            | models.Q(range_end__isnull=True)
                            | models.Q(range_start__lte=models.F("range_end"))
                        )
                    )
                    | (
                        models.Q(
                            scope=HoldScope.SESSION,
                            range_start__isnull=True,
                            range_end__isnull=True,
                        )
                        & ~models.Q(session_id="")
                    )
                ),
                violation_error_message="Each scope takes its own members: the whole org "
                "nothing else; a date range from, to or both (from not after to); a session "
                "its session id.",
            ),
            models.CheckConstraint(
                name="legal_hold_released_with_reason",
                condition=models.Q(released_at__isnull=True) | ~models.Q(release_reason=""),
            ),
        ]
        indexes = [
            # An org has few holds: its list, and its active ones, through this one.
            models.Index(fields=["org", "-set_at"], name="audit_hold_org"),
            # Which orgs hold anything now (the retention's runs ask, without a scan).
            models.Index(
                fields=["org"], name="audit_hold_active", condition=models.Q(released_at=None)
            ),
        ]
        ordering = ["-set_at", "-id"]

    def __str__(self) -> str:
        return f"{self.hold_id} ({self.covers})"

    @property
    def is_active(self) -> bool:
        return self.released_at is None

    @property
    def covers(self) -> str:
        """What the hold covers, in words."""
        if self.scope == HoldScope.ORG:
            return "the whole org"
        if self.scope == HoldScope.SESSION:
            return f"session {self.session_id}"
        start = self.range_start.isoformat() if self.range_start else "the first receipt"
        end = self.range_end.isoformat() if self.range_end else "today and after"
        return f"receipts received {start} to {end}"

    @property
    def received_span(self) -> tuple[datetime | None, datetime | None]:
        """A range hold's days as ``[start, end)`` of ``received_at`` (None: open)."""
        start = datetime.combine(self.range_start, time.min, UTC) if self.range_start else None
        end = (
            datetime.combine(self.range_end + timedelta(days=1), time.min, UTC)
            if self.range_end
            else None
        )
        return start, end
