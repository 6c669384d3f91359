"""Writes of analytics: one upsert per refused push."""

from __future__ import annotations

from contextlib import nullcontext

from django.db import connection, transaction
from django.utils import timezone

from apps.analytics.models import RefusalCount
from apps.common import metrics, outbound
from apps.tenancy.models import Org

_UPSERT = (
    f"INSERT INTO {RefusalCount._meta.db_table} (org_id, day, kind, count) "  # noqa: S608
    "VALUES (%s, %s, %s, 1) ON CONFLICT (org_id, day, kind) "
    f"DO UPDATE SET count = {RefusalCount._meta.db_table}.count + 1"
)


def refusal_record(*, org: Org, kind: str, action_hash: str = "") -> None:
    """Count one refused receipt of ``kind`` for today (UTC); exact under concurrency.
    Emits ``receipt.refused`` (the verdict kind and, where the receipt decoded that far,
    its action hash: nothing else of the receipt) with the count."""
    now = timezone.now()
    # One statement needs no transaction of its own; with an event to record, the count
    # and the event commit together.
    together = transaction.atomic() if outbound.wanted(org.pk, "receipt.refused") else nullcontext()
    with together, connection.cursor() as cursor:
        cursor.execute(_UPSERT, [org.pk, now.date(), kind[:64]])
        outbound.emit(
            org_id=org.pk,
            event_type="receipt.refused",
            payload=lambda: {
                "kind": kind[:64],
                "action_hash": action_hash or None,
                "refused_at": now.isoformat().replace("+00:00", "Z"),
            },
        )
    metrics.receipts_refused(kind)
