"""Reads of approvals. Nothing here writes: an approval past its expiry is shown as its
``on_timeout`` outcome (:func:`approval_as_of`) while the stored row waits for the sweep."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Prefetch, QuerySet, prefetch_related_objects
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from apps.approvals.content import action_spec, signed_approval_block
from apps.approvals.errors import AmbiguousTicket, ApprovalNotFound
from apps.approvals.models import (
    COUNTED_VOTE,
    COUNTED_VOTES_ATTR,
    Approval,
    ApprovalEscalation,
    ApprovalRollup,
    ApprovalStatus,
    ApprovalVote,
    ApproverKey,
)
from apps.common.stored_json import stored_value
from apps.receipts.columns import indexed_text
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import RETIRED_BODY
from apps.receipts.verifier import link_hash
from apps.tenancy.models import Org


def approval_as_of(approval: Approval, now: datetime | None = None) -> Approval:
    """``approval`` as it stands at ``now``: past its expiry, with the outcome its signed
    ``on_timeout`` gives (a copy; the stored row is the sweep's to change)."""
    outcome = approval.expiry_outcome(now or timezone.now())
    if outcome is None:
        return approval
    shown = copy.copy(approval)
    for name, value in outcome.items():
        setattr(shown, name, value)
    return shown


def approval_get_by_id(*, org: Org, approval_id: str) -> Approval:
    """The org's approval with ``approval_id``, as it stands now; another org's is 404."""
    approval = Approval.objects.filter(org=org, approval_id=approval_id).first()
    if approval is None:
        raise ApprovalNotFound(f"no approval {approval_id!r} for this team")
    return approval_as_of(approval)


def approval_get(*, org: Org, action_hash: str) -> Approval:
    """The approval ``action_hash`` names (the content hash or the suspend ticket)."""
    approval = approval_resolve(org=org, ref=action_hash)
    if approval is None:
        raise ApprovalNotFound("no approval for this action_hash")
    return approval_as_of(approval)


def eligible_approvers(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """Who may vote now: the frozen roster's keys still active once the first vote froze
    it; before that, the org's active keys narrowed to the suspension's signed
    ``approver_pubkeys`` when that list is non-empty (an empty list narrows nothing)."""
    # Confirmed and not revoked: a key a member enrolled counts once it is confirmed.
    active = set(
        ApproverKey.objects.active()
        .filter(org_id=approval.org_id)
        .values_list("public_key", flat=True)
    )
    if approval.roster_frozen_at is not None:
        return sorted(active & set(approval.roster))
    if content is None and approval.suspended_content:
        content = stored_value(approval.suspended_content)
    listed = signed_approval_block(content).get("approver_pubkeys")
    if isinstance(listed, list) and listed:
        active &= {key for key in listed if isinstance(key, str)}
    return sorted(active)


def approval_roster(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """The roster a quorum leg signs over: frozen, or the one the next vote would freeze."""
    if approval.roster_frozen_at is not None:
        return list(approval.roster)
    return eligible_approvers(approval, content=content)


# The ticket index's condition, as SQL text: only a condition written out proves it in a
# plan made for any values (a generic plan), where ``ticket_hash = $2`` cannot; without it
# such a plan reads every approval of the org.
TICKETED = RawSQL(  # noqa: S611 (constant text: the model's own table and column)
    f'"{Approval._meta.db_table}"."ticket_hash" <> \'\'', (), output_field=BooleanField()
)


def approval_resolve(*, org: Org, ref: str) -> Approval | None:
    """The org's approval a request's hash names: by the suspended content's action_hash,
    else by its suspend ticket. A ticket shared by two suspended contents is refused."""
    direct = Approval.objects.filter(org=org, action_hash=ref).first()
    if direct is not None:
        return direct
    tickets = Approval.objects.filter(TICKETED, org=org, ticket_hash=ref)
    by_ticket = list(tickets.order_by("pk")[:3])
    if len(by_ticket) > 1:
        hashes = ", ".join(approval.action_hash for approval in by_ticket)
        raise AmbiguousTicket(
            f"the suspend ticket {ref} names more than one suspended receipt of this org "
            f"({hashes}): address the approval by the receipt's content.action_hash"
        )
    return by_ticket[0] if by_ticket else None


def approvals_recently_decided(
    *, approvals: QuerySet[Approval], org_id: int, limit: int = 10
) -> list[Approval]:
    """The org's ``limit`` approvals decided last (among ``approvals``, the reader's), newest
    first: the decided ones of the (org, resolved_at) index (a pending approval has no
    ``resolved_at``, so it is not in it), ``limit`` entries of it."""
    decided = approvals.filter(org_id=org_id, resolved_at__isnull=False)
    return list(
        decided.exclude(status=ApprovalStatus.PENDING).order_by("-resolved_at", "-id")[:limit]
    )


def mirrored_content(*, org: Org, action_hash: str) -> dict[str, Any] | None:
    """The content of the mirrored receipt with ``action_hash``, if any (none once its body
    is retired past the org's retention: it is then only in the org's archive)."""
    text = (
        MirrorEntry.objects.filter(org=org, action_hash=action_hash)
        .values_list("receipt", flat=True)
        .first()
    )
    if text is None or text == RETIRED_BODY:
        return None
    content: dict[str, Any] = stored_value(text)["content"]
    return content


def counted_votes(approval: Approval) -> QuerySet[ApprovalVote]:
    """The votes that count (:meth:`Approval.counted_votes`: set-aside votes stay in the
    history, uncounted)."""
    return approval.counted_votes()


def approval_with_votes(approval: Approval) -> Approval:
    """``approval`` with its counted votes read once, for a record that shows them and
    derives its outcome and deciding approver from them (:meth:`Approval.outcome_at`)."""
    prefetch_related_objects(
        [approval],
        Prefetch(
            "votes", queryset=ApprovalVote.objects.filter(COUNTED_VOTE), to_attr=COUNTED_VOTES_ATTR
        ),
    )
    return approval


# The outcomes team-path reports (an approval the agent closed locally reports rejected).
TEAMPATH_OUTCOMES = [
    ApprovalStatus.PENDING.value,
    ApprovalStatus.APPROVED.value,
    ApprovalStatus.REJECTED.value,
    ApprovalStatus.EXPIRED.value,
]


# How far back along a session's chain a lifecycle link may answer a suspension (the
# escalations between a suspension and its decision, then the decision before a completion).
_LINK_WALK_MAX = 16


def approval_for_lifecycle_link(*, org: Org, content: dict[str, Any]) -> Approval | None:
    """The approval a session's lifecycle link (a decision, an escalation, a completion)
    answers: the nearest earlier suspension of the same action in the same session whose
    link hash the link's chain leads back to (receipts.md §13), through the mirrored links
    between them. None when the link answers no approval of ``org``."""
    session_id, seq = content.get("session_id"), content.get("seq")
    if not isinstance(session_id, str) or not session_id or not isinstance(seq, int):
        return None
    stored_session = indexed_text(session_id)
    spec = action_spec(content)
    candidates = Approval.objects.filter(
        org=org,
        session_id=stored_session,
        session_seq__lt=seq,
        session_seq__gte=seq - _LINK_WALK_MAX,
    ).order_by("-session_seq")
    for approval in candidates:
        suspended: dict[str, Any] = stored_value(approval.suspended_content)
        if action_spec(suspended) != spec:
            continue
        if _chain_reaches(org, stored_session, content, approval.session_seq, link_hash(suspended)):
            return approval
    return None


def _chain_reaches(
    org: Org, session_id: str, content: dict[str, Any], target_seq: int | None, target: str
) -> bool:
    """Whether ``content``'s chain leads back to the link ``target`` at ``target_seq``,
    through the org's mirrored links of the session."""
    seq, previous = content["seq"], content.get("prev_receipt_hash")
    while target_seq is not None and seq - 1 > target_seq:
        text = (
            MirrorEntry.objects.filter(
                org=org, session_id=session_id, session_seq=seq - 1, link_hash=previous
            )
            .values_list("receipt", flat=True)
            .first()
        )
        if text is None or text == RETIRED_BODY:  # a retired link's content is archived
            return False
        seq, previous = seq - 1, stored_value(text)["content"].get("prev_receipt_hash")
    return seq - 1 == target_seq and previous == target


# --- The dashboard's approval counters (``ApprovalRollup``) --------------------------------


@dataclass
class ApprovalDay:
    """One day of an org's approvals, as ``ApprovalRollup`` counts them."""

    opened: int = 0
    approved: int = 0
    rejected: int = 0
    expired: int = 0
    decided_locally: int = 0
    decided: int = 0
    decision_micros: int = 0

    @property
    def settled(self) -> int:
        return self.approved + self.rejected + self.expired + self.decided_locally

    def add(self, other: ApprovalDay, sign: int = 1) -> None:
        for field in fields(self):
            name = field.name
            setattr(self, name, getattr(self, name) + sign * getattr(other, name))


ROLLUP_COLUMNS = tuple(field.name for field in fields(ApprovalDay))
_SETTLED = ("approved", "rejected", "expired", "decided_locally")


def approval_contribution(
    *, created_at: datetime, status: str, resolved_at: datetime | None
) -> dict[date, ApprovalDay]:
    """What one approval row adds to its org's rollups (``ApprovalRollup``): the rule the
    database trigger applies (approvals migration 0009), for what is added at read time and
    for the tests that recount."""
    days = {_utc_day(created_at): ApprovalDay(opened=1)}
    if status == ApprovalStatus.PENDING:
        return days
    settled = days.setdefault(_utc_day(resolved_at or created_at), ApprovalDay())
    if status in _SETTLED:
        setattr(settled, str(status), getattr(settled, str(status)) + 1)
    if status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED) and resolved_at is not None:
        settled.decided += 1
        settled.decision_micros += max(0, (resolved_at - created_at) // timedelta(microseconds=1))
    return days


def approval_days(*, org: Org, now: datetime | None = None) -> dict[date, ApprovalDay]:
    """The org's approvals per day as they stand at ``now``: the rollups, plus the expiry
    outcomes the sweep has not stored yet (``Approval.expiry_outcome``, the rule every
    approval page shows), so the counters agree with the pages before and after the sweep.

    One statement reads both (one snapshot): a sweep committing meanwhile is seen either
    in the rollups or in the backlog, never in both or neither. The backlog is read by the
    ``approval_org_expiry`` index; its cost is the sweep's lag, not the org's history."""
    now = now or timezone.now()
    backlog = (
        Approval.objects.expiry_unstored_at(now)
        .filter(org_id=org.pk)
        .order_by()
        .values_list("created_at", "status", "resolved_at", "expires_at", "on_timeout", "flag")
    )
    backlog_sql, backlog_params = backlog.query.sql_with_params()
    padding = ", ".join(["NULL"] * 6)
    counts = ", ".join(["NULL"] * len(ROLLUP_COLUMNS))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT day, {', '.join(ROLLUP_COLUMNS)}, {padding} "  # noqa: S608
            f"FROM {ApprovalRollup._meta.db_table} WHERE org_id = %s "
            f"UNION ALL SELECT NULL, {counts}, b.* FROM ({backlog_sql}) AS b",
            [org.pk, *backlog_params],
        )
        rows = cursor.fetchall()
    days: dict[date, ApprovalDay] = {}
    width = len(ROLLUP_COLUMNS)
    for row in rows:
        if row[0] is not None:
            day = row[0] if isinstance(row[0], date) else date.fromisoformat(str(row[0]))
            days.setdefault(day, ApprovalDay()).add(ApprovalDay(*map(int, row[1 : 1 + width])))
            continue
        created, status, resolved, expires, on_timeout, flag = row[1 + width :]
        stored = Approval(
            created_at=_aware(created), status=status,
            resolved_at=None if resolved is None else _aware(resolved),
            expires_at=None if expires is None else _aware(expires),
            on_timeout=on_timeout, flag=flag,
        )  # fmt: skip
        shown = approval_as_of(stored, now)
        for sign, approval in ((-1, stored), (1, shown)):
            moved = approval_contribution(
                created_at=approval.created_at, status=approval.status,
                resolved_at=approval.resolved_at,
            )  # fmt: skip
            for day, counts_of_day in moved.items():
                days.setdefault(day, ApprovalDay()).add(counts_of_day, sign)
    return days


def approval_queue(*, org: Org, limit: int = 50, now: datetime | None = None) -> list[Approval]:
    """The org's approvals still pending at ``now``, oldest first, from its ``limit`` oldest
    stored as pending (the console's queue): read by the ``approval_org_status`` index,
    ``limit`` rows whatever the org's history. One whose expiry settled it, not stored yet,
    is left out, as the counters and its own page count it."""
    now = now or timezone.now()
    stored = Approval.objects.filter(org=org, status=ApprovalStatus.PENDING).order_by("created_at")[
        :limit
    ]
    shown = [approval_as_of(approval, now) for approval in stored]
    return [approval for approval in shown if approval.status == ApprovalStatus.PENDING]


def approvals_pending_decided_under_another_policy(
    *, org: Org, policy_hash: str, limit: int = 100, now: datetime | None = None
) -> list[Approval]:
    """The org's approvals still pending at ``now`` whose suspension was decided under
    another policy than ``policy_hash`` (the active one: so, a replaced one), oldest first.
    Approvals whose content signs no policy hash are not among them."""
    now = now or timezone.now()
    stored = (
        Approval.objects.filter(org=org, status=ApprovalStatus.PENDING)
        .exclude(policy_hash="")
        .exclude(policy_hash=policy_hash)
        .order_by("created_at")[:limit]
    )
    shown = [approval_as_of(approval, now) for approval in stored]
    return [approval for approval in shown if approval.status == ApprovalStatus.PENDING]


def _utc_day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def _aware(value: object) -> datetime:
    """A timestamp from a raw cursor (SQLite hands back text), aware in UTC."""
    moment = value if isinstance(value, datetime) else parse_datetime(str(value))
    if moment is None:
        raise ValueError(f"not a timestamp: {value!r}")
    return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)


def approver_names(org_id: int, public_keys: Iterable[str] | None = None) -> dict[str, str]:
    """Public key -> the person and device it stands for, as every page names an approver:
    "Alice Doe (work laptop)" for a key a member holds, "label (key id)" for one registered
    for a script, the key id alone without a label. Revoked keys too (history names them)."""
    keys = ApproverKey.objects.filter(org_id=org_id).select_related("member")
    if public_keys is not None:
        keys = keys.filter(public_key__in=list(public_keys))
    return {key.public_key: approver_key_name(key) for key in keys}


def approver_key_name(key: ApproverKey) -> str:
    member = key.member
    if member is not None:
        person = member.get_full_name() or member.get_username()
        return f"{person} ({key.label or key.key_id})"
    return f"{key.label} ({key.key_id})" if key.label else key.key_id


def member_approver_keys(*, member_id: int, org_ids: Iterable[int]) -> QuerySet[ApproverKey]:
    """The keys ``member_id`` holds in those orgs, newest first, revoked ones too."""
    return (
        ApproverKey.objects.filter(member_id=member_id, org_id__in=list(org_ids))
        .select_related("org")
        .order_by("-created_at", "-id")
    )


def approval_reminder_recipients(approval: Approval) -> list[int]:
    """The members holding the roster's keys who have not voted yet (user ids)."""
    voted = set(approval.counted_votes().values_list("approver_public_key", flat=True))
    waiting = [key for key in approval_roster(approval) if key not in voted]
    return sorted(
        {
            member
            for member in ApproverKey.objects.filter(
                org_id=approval.org_id, public_key__in=waiting, member__isnull=False
            ).values_list("member_id", flat=True)
            if member is not None
        }
    )


def approval_escalation_recipients(approval: Approval) -> list[int]:
    """The escalation list's members (user ids) of the setting the approval falls under."""
    settings = {
        setting.rule_id: setting
        for setting in ApprovalEscalation.objects.filter(
            org_id=approval.org_id, rule_id__in=[approval.rule_id, ""]
        )
    }
    setting = settings.get(approval.rule_id) or settings.get("")
    if setting is None:
        return []
    return sorted({int(user_id) for user_id in setting.escalate_to if isinstance(user_id, int)})
