"""The approval's history: one row per state change, written in the transaction that
makes the change; the changes approvers care about are also emitted as outbound events
(``approval.*``, apps.common.outbound) in that transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from apps.approvals.models import (
    Approval,
    ApprovalEvent,
)
from apps.common import outbound
from apps.common.stored_json import stored_value
from apps.common.timestamps import utc_text


def approval_event(approval: Approval, kind: str, now: datetime, **detail: Any) -> None:
    ApprovalEvent.objects.create(
        org_id=approval.org_id, approval=approval, kind=kind, detail=detail, at=now
    )
    for event_type, extra in _outbound(approval, kind, detail):
        outbound.emit(
            org_id=approval.org_id,
            event_type=event_type,
            payload=lambda extra=extra: {**approval_payload(approval), **extra},  # type: ignore[misc]
        )


def _outbound(
    approval: Approval, kind: str, detail: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """The outbound events of a history row: (type, members beside the approval's own)."""
    if kind == "opened":
        events: list[tuple[str, dict[str, Any]]] = [("approval.opened", {})]
        if not detail.get("provisional"):
            events.append(("approval.waiting_for_approvers", {}))
        return events
    if kind == "confirmed":
        return [("approval.waiting_for_approvers", {})]
    if kind == "vote":
        return [
            ("approval.vote_recorded",
             {"decision": detail.get("decision"), "approver_public_key": detail.get("approver")})
        ]  # fmt: skip
    if kind == "resolved":
        return [("approval.decided", {"outcome": detail.get("status"), "reason": "votes"})]
    if kind == "expired":
        return [("approval.decided", {"outcome": detail.get("outcome"), "reason": "expired"})]
    if kind == "reminded":
        return [("approval.reminder", {})]
    if kind == "escalated":
        before = detail.get("minutes_before_expiry")
        return [("approval.escalated", {"minutes_before_expiry": before})]
    if kind == "decided_locally":
        return [("approval.decided", {"outcome": "decided_locally", "reason": "decision_link"})]
    return []


def content_summary(approval: Approval) -> dict[str, Any] | None:
    """What the suspended action is, for a notification (no action fields' values)."""
    if not approval.suspended_content:
        return None
    content = stored_value(approval.suspended_content)
    action = content.get("action") if isinstance(content.get("action"), dict) else {}
    policy = content.get("policy") if isinstance(content.get("policy"), dict) else {}
    fields = action.get("fields")
    return {
        "agent_identity": content.get("agent_identity"),
        "kind": content.get("kind"),
        "trust_level": content.get("trust_level"),
        "action": {
            "workflow": action.get("workflow"),
            "verb": action.get("verb"),
            "account": action.get("account"),
            "field_names": sorted(fields) if isinstance(fields, dict) else [],
        },
        "policy": {
            "rule_id": policy.get("rule_id"),
            "rule_display": policy.get("rule_display"),
            "decision_path": policy.get("decision_path"),
        },
    }


def signing_url(approval: Approval) -> str:
    try:
        path = reverse("console-approval", args=[approval.approval_id])
    except NoReverseMatch:
        path = f"/approve/{approval.approval_id}"
    return f"{settings.PUBLIC_BASE_URL}{path}"


def approval_payload(approval: Approval) -> dict[str, Any]:
    """The members every ``approval.*`` event carries (the ``ApprovalEvent`` component)."""
    return {
        "approval_id": approval.approval_id,
        "action_hash": approval.action_hash,
        "ticket_hash": approval.ticket_hash or None,
        "status": approval.status,
        "threshold": approval.threshold,
        "approved_count": approval.approved_count,
        "rule_id": approval.rule_id or None,
        "expires_at": utc_text(approval.expires_at),
        "on_timeout": approval.on_timeout or None,
        "signing_url": signing_url(approval),
        "summary": content_summary(approval),
    }
