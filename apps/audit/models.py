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
