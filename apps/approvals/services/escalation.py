"""Chasing pending approvals (``ApprovalEscalation``): a reminder to the roster every so
often, then one ``approval.escalated`` before the signed expiry. Run by the periodic task
``escalate_approvals`` with the clock it is given, so a test passes its own ``now``.

Each approval is locked while its due reminder or escalation is decided and recorded (the
history row, the outbound event and its emails in one transaction), so two workers never
send the same reminder twice: the second finds ``reminded_at`` already moved.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.approvals.models import Approval, ApprovalEscalation, ApprovalStatus
from apps.approvals.services.history import approval_event
from apps.common.errors import InvalidInput
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.models import AuditKind, Membership, Org


def escalation_for(approval: Approval, settings: dict[str, ApprovalEscalation]) -> (
    ApprovalEscalation | None
):  # fmt: skip
    """The org's setting for the approval's rule, else the org's default (rule id "")."""
    return settings.get(approval.rule_id) or settings.get("")


def approvals_escalate(*, now: datetime | None = None) -> int:
    """Send every due reminder and escalation at ``now``; how many were sent."""
    now = now or timezone.now()
    by_org: dict[int, dict[str, ApprovalEscalation]] = {}
    for setting in ApprovalEscalation.objects.all():
        by_org.setdefault(setting.org_id, {})[setting.rule_id] = setting
    if not by_org:
        return 0
    pending = Approval.objects.filter(
        org_id__in=list(by_org), status=ApprovalStatus.PENDING
    ).values_list("pk", flat=True)
    sent = 0
    for pk in list(pending):
        with transaction.atomic():
            locked = Approval.objects.select_for_update().get(pk=pk)
            found = escalation_for(locked, by_org[locked.org_id])
            if found is not None:
                sent += _chase_locked(locked, found, now)
    return sent


def _chase_locked(approval: Approval, setting: ApprovalEscalation, now: datetime) -> int:
    if setting.escalate_before_minutes and approval.escalation_due_at(
        now, timedelta(minutes=setting.escalate_before_minutes)
    ):
        approval.escalated_at = now
        approval.save(update_fields=["escalated_at"])
        approval_event(
            approval, "escalated", now,
            minutes_before_expiry=setting.escalate_before_minutes,
        )  # fmt: skip
        return 1
    if setting.remind_every_minutes and approval.reminder_due_at(
        now, timedelta(minutes=setting.remind_every_minutes)
    ):
        approval.reminded_at = now
        approval.save(update_fields=["reminded_at"])
        approval_event(approval, "reminded", now)
        return 1
    return 0


def approval_escalation_set(
    *,
    org: Org,
    rule_id: str = "",
    remind_every_minutes: int | None,
    escalate_before_minutes: int | None,
    escalate_to: list[int],
    actor: Actor,
) -> ApprovalEscalation:
    """Set how ``org`` chases approvals of ``rule_id`` ("" for every rule without its own):
    the escalation list must be members of the org. Recorded in the org's audit trail."""
    for minutes in (remind_every_minutes, escalate_before_minutes):
        if minutes is not None and minutes < 1:
            raise InvalidInput("minutes: at least 1, or empty for never")
    listed = Membership.objects.filter(org=org, user_id__in=escalate_to)
    members = set(listed.values_list("user_id", flat=True))
    strangers = sorted(set(escalate_to) - members)
    if strangers:
        raise InvalidInput(f"escalate_to: not members of {org.slug}: {strangers}")
    with transaction.atomic():
        setting, _ = ApprovalEscalation.objects.update_or_create(
            org=org, rule_id=rule_id,
            defaults={"remind_every_minutes": remind_every_minutes,
                      "escalate_before_minutes": escalate_before_minutes,
                      "escalate_to": sorted(members)},
        )  # fmt: skip
        org_audit_record(
            org=org, kind=AuditKind.APPROVAL_ESCALATION_SET, actor=actor,
            summary=f"approval escalation for {rule_id or 'every rule'}: remind every "
            f"{remind_every_minutes or 'never'} min, escalate {escalate_before_minutes or 'never'}"
            " min before expiry",
            detail={"rule_id": rule_id, "remind_every_minutes": remind_every_minutes,
                    "escalate_before_minutes": escalate_before_minutes,
                    "escalate_to": sorted(members)},
        )  # fmt: skip
    return setting
