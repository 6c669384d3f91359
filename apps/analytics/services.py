"""Writes of analytics: one upsert per refused push."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from apps.analytics.models import RefusalCount
from apps.common import metrics
from apps.tenancy.models import Org

_UPSERT = (
    f"INSERT INTO {RefusalCount._meta.db_table} (org_id, day, kind, count) "  # noqa: S608
    "VALUES (%s, %s, %s, 1) ON CONFLICT (org_id, day, kind) "
    f"DO UPDATE SET count = {RefusalCount._meta.db_table}.count + 1"
)


def refusal_record(*, org: Org, kind: str) -> None:
    """Count one refused receipt of ``kind`` for today (UTC); exact under concurrency."""
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT, [org.pk, timezone.now().date(), kind[:64]])
    metrics.receipts_refused(kind)
