"""Per-org, per-day rollups of the mirror, so the dashboard never counts an org's entries.

The mirror is append-only and each org's entries commit in ``seq`` order (the append holds
the org's head row until it commits), and the counted properties (day received, trust
level, supersede) never change after the append. So a rollup folded from the committed
entries up to ``RollupCursor.seq`` is exact, and a read adds the few entries past the
cursor: exact at every read, at a cost set by the cursor's lag, not by the org's size.
"""

from __future__ import annotations

from django.db import models

from apps.tenancy.models import Org


class DailyRollup(models.Model):
    """One org's mirrored receipts received on one day (UTC)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    receipts = models.BigIntegerField(default=0)
    l1 = models.BigIntegerField(default=0)
    supersedes = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "day"], name="rollup_org_day")]

    def __str__(self) -> str:
        return f"{self.org_id} {self.day}: {self.receipts}"


class RollupCursor(models.Model):
    """The last ``seq`` of an org's mirror folded into its rollups."""

    org = models.OneToOneField(Org, on_delete=models.CASCADE, primary_key=True, related_name="+")
    seq = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.org_id}: folded to {self.seq}"
