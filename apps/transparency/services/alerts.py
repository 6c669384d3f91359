"""The monitor's alerts as ``transparency.alert`` events for the orgs they concern."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.common import outbound
from apps.common.timestamps import utc_text
from apps.transparency.models import OrgLog
from apps.transparency.services.scope import every_org


def transparency_alerts_emit(*, alerts: list[str], log_url: str) -> int:
    """Record a ``transparency.alert`` event for each alert the monitor raised: for the org
    an alert names (by its log id), or for every org with a log when it is about the log as
    a whole. Returns the events emitted."""
    if not alerts:
        return 0
    now = utc_text(timezone.now())
    emitted = 0
    with every_org(), transaction.atomic():
        logs = dict(OrgLog.objects.values_list("log_id", "org_id"))
        for alert in alerts:
            payload: dict[str, Any] = {"alert": alert, "log": log_url, "observed_at": now}
            named = [org_id for log_id, org_id in logs.items() if log_id in alert]
            for org_id in named or logs.values():
                outbound.emit(org_id=org_id, event_type="transparency.alert", payload=payload.copy)
                emitted += 1
    return emitted
