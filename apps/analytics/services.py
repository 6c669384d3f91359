"""Folding the committed mirror into the daily rollups (apps/analytics/models.py)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from apps.analytics.models import DailyRollup, RollupCursor
from apps.analytics.selectors import day_counts
from apps.receipts.models import MirrorHead

# Entries folded per org and transaction: bounds a catch-up's lock and memory.
FOLD_BATCH = 20_000


def rollups_fold_org(*, org_id: int, batch: int = FOLD_BATCH) -> int:
    """Fold up to ``batch`` committed entries past the org's cursor; how many were folded.

    One transaction: the cursor row is locked first, so two workers folding the same org
    take turns, and a failure leaves rollups and cursor as they were.
    """
    with transaction.atomic():
        RollupCursor.objects.get_or_create(org_id=org_id)
        cursor = RollupCursor.objects.select_for_update().get(org_id=org_id)
        head = MirrorHead.objects.filter(org_id=org_id).values_list("size", flat=True).first()
        upto = min(head or 0, cursor.seq + batch)
        if upto <= cursor.seq:
            return 0
        for row in day_counts(org_id=org_id, after=cursor.seq, upto=upto):
            updated = DailyRollup.objects.filter(org_id=org_id, day=row["day"]).update(
                receipts=F("receipts") + row["receipts"],
                l1=F("l1") + row["l1"],
                supersedes=F("supersedes") + row["supersedes"],
            )
            if not updated:
                DailyRollup.objects.create(
                    org_id=org_id, day=row["day"], receipts=row["receipts"], l1=row["l1"],
                    supersedes=row["supersedes"],
                )  # fmt: skip
        folded = upto - cursor.seq
        cursor.seq = upto
        cursor.save(update_fields=["seq"])
        return folded


def rollups_catch_up(*, batch: int = FOLD_BATCH) -> int:
    """Fold every org whose mirror is ahead of its cursor (one batch each); entries folded."""
    folded = Coalesce(
        Subquery(RollupCursor.objects.filter(org_id=OuterRef("org_id")).values("seq")[:1]),
        Value(0),
    )
    behind = (
        MirrorHead.objects.annotate(folded=folded)
        .filter(size__gt=F("folded"))
        .order_by("org_id")
        .values_list("org_id", flat=True)
    )
    return sum(rollups_fold_org(org_id=org_id, batch=batch) for org_id in behind)
