"""Writes for orgs: creating one, setting its plan and limits.

Each operator act takes the :class:`~apps.tenancy.audit_trail.Actor` who makes it and writes it
into the org's audit trail (:func:`org_audit_record`) in the same transaction.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from apps.common.errors import InvalidInput
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import MAX_POLICY_QUORUM, AuditKind, Org, Plan


def org_create(
    *, slug: str, name: str | None = None, plan: str = Plan.FREE, actor: Actor = OPERATOR
) -> Org:
    if plan not in Plan.values:
        raise InvalidInput(f"unknown plan {plan!r}; known: {', '.join(Plan.values)}")
    if Org.objects.filter(slug=slug).exists():
        raise InvalidInput(f"an org with slug {slug!r} already exists")
    org = Org(slug=slug, name=name or slug, plan=plan)
    org.full_clean()
    with transaction.atomic():
        org.save()
        org_audit_record(
            org=org, kind=AuditKind.ORG_CREATED, actor=actor,
            summary=f"org {slug} created ({plan} plan)",
            detail={"slug": slug, "name": org.name, "plan": plan},
        )  # fmt: skip
    return org


_UNCHANGED: Any = object()


def retention_days_check(days: int) -> None:
    """A retention of receipt bodies an org may have: 0 (for ever), or at least
    ``RETENTION_FLOOR_DAYS`` (a promise to keep them that long, whoever asks for less)."""
    floor = settings.RETENTION_FLOOR_DAYS
    if days < 0:
        raise InvalidInput("the retention cannot be negative")
    if 0 < days < floor:
        raise InvalidInput(
            f"a retention of {days} days is below the floor of {floor} days "
            "(RETENTION_FLOOR_DAYS); 0 keeps receipts for ever"
        )


def org_set_limits(
    *,
    org: Org,
    monthly_receipt_cap: int | None = _UNCHANGED,
    rate_per_minute: int | None = _UNCHANGED,
    rate_burst: int | None = _UNCHANGED,
    receipt_retention_days: int | None = _UNCHANGED,
    plan: str = _UNCHANGED,
    actor: Actor = OPERATOR,
) -> Org:
    """Set the org's plan and override its limits; None resets a limit to the plan's
    default, an omitted one is left as it is. Only what changes is saved and audited."""
    if plan is not _UNCHANGED and plan not in Plan.values:
        raise InvalidInput(f"unknown plan {plan!r}; known: {', '.join(Plan.values)}")
    changes = {
        name: value
        for name, value in (
            ("plan", plan),
            ("monthly_receipt_cap", monthly_receipt_cap),
            ("rate_per_minute", rate_per_minute),
            ("rate_burst", rate_burst),
            ("receipt_retention_days", receipt_retention_days),
        )
        if value is not _UNCHANGED and getattr(org, name) != value
    }
    if monthly_receipt_cap not in (None, _UNCHANGED) and monthly_receipt_cap < 0:
        raise InvalidInput("the monthly cap cannot be negative")
    for name, rate in (("rate_per_minute", rate_per_minute), ("rate_burst", rate_burst)):
        if rate not in (None, _UNCHANGED) and rate < 1:
            raise InvalidInput(f"{name.replace('_', ' ')} must be at least 1")
    if receipt_retention_days not in (None, _UNCHANGED):
        retention_days_check(receipt_retention_days)
    for name, value in changes.items():
        setattr(org, name, value)
    if changes:
        with transaction.atomic():
            org.save(update_fields=list(changes))
            shown = ", ".join(f"{name} {value}" for name, value in changes.items())
            org_audit_record(
                org=org, kind=AuditKind.ORG_LIMITS_SET, actor=actor, detail=changes,
                summary=f"limits set: {shown}",
            )  # fmt: skip
    return org


def org_set_policy_quorum(*, org: Org, quorum: int, actor: Actor = OPERATOR) -> Org:
    """Set how many approver keys must approve a policy change before it activates (0: a
    deploy activates at once). Only an owner may (the console, the dashboard API and the
    command check it); the change is audited. Open proposals keep the quorum they were
    made under."""
    if isinstance(quorum, bool) or not isinstance(quorum, int):
        raise InvalidInput("policy_quorum: an integer")
    if not 0 <= quorum <= MAX_POLICY_QUORUM:
        raise InvalidInput(f"policy_quorum: from 0 to {MAX_POLICY_QUORUM}")
    with transaction.atomic():
        locked = Org.objects.select_for_update().get(pk=org.pk)
        previous = locked.policy_quorum
        if previous != quorum:
            locked.policy_quorum = quorum
            locked.save(update_fields=["policy_quorum"])
            org_audit_record(
                org=locked, kind=AuditKind.POLICY_QUORUM_SET, actor=actor,
                summary=f"policy quorum set to {quorum} (was {previous})",
                detail={"policy_quorum": quorum, "previous_policy_quorum": previous},
            )  # fmt: skip
    org.policy_quorum = quorum
    return org
