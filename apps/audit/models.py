"""Evidence exports built in the background.

The table was made by the ``events`` app, where the job used to live; it keeps its name
(``db_table``) and its row-level security (migration events 0002), so moving the model
here moved no data (migration audit 0002 and events 0006 change Django's state only).
"""

from __future__ import annotations

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
        indexes = [models.Index(fields=["org", "-created_at"], name="events_export_org")]
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
    size = models.PositiveBigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, default="")
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
        return f"{self.org_id} {self.month:%Y-%m} #{self.first_seq}-{self.last_seq} {self.state}"

    def covers(self, seq: int) -> bool:
        return self.first_seq <= seq <= self.last_seq
