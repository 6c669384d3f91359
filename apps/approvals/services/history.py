"""The approval's history: one row per state change, written in the transaction that
makes the change."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.approvals.models import (
    Approval,
    ApprovalEvent,
)


def approval_event(approval: Approval, kind: str, now: datetime, **detail: Any) -> None:
    ApprovalEvent.objects.create(
        org_id=approval.org_id, approval=approval, kind=kind, detail=detail, at=now
    )
