"""Counters the mirror cannot derive from its own rows: refused pushes, per day and kind."""

from __future__ import annotations

from django.db import models

from apps.tenancy.models import Org


class RefusalCount(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    kind = models.CharField(max_length=64)  # the verdict kind (Malformed, BadSignature, ...)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "day", "kind"], name="refusal_org_day_kind")
        ]

    def __str__(self) -> str:
        return f"{self.org_id} {self.day} {self.kind}: {self.count}"
