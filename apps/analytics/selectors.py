"""Headline counters for the dashboard: every number from the org's own rows.

Nothing here counts the org's mirror or its approvals: the receipt counters (totals and
30-day series) come from the per-org daily rollups plus the entries not folded yet
(``receipt_days``), the approval counters from the approvals' daily rollups plus the
expiries the sweep has not stored yet (``apps.approvals.selectors.approval_days``), the
totals from the head row, refusals from their per-day counts. So the cost does not grow
with the org's history; the dashboard can call this on every load.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from apps.approvals.selectors import ApprovalDay, approval_days
from apps.policy.models import PolicyHead
from apps.receipts.models import MirrorEntry, RefusalCount
from apps.receipts.selectors import mirror_head_get
from apps.tenancy.models import Org

SPARK_DAYS = 30


@dataclass(frozen=True)
class StatCounter:
    key: str
    label: str
    value: int | float | None
    display: str
    spark: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "value": self.value,
            "display": self.display,
            "spark": self.spark,
        }


def _days(today: date) -> list[date]:
    return [today - timedelta(days=offset) for offset in range(SPARK_DAYS - 1, -1, -1)]


def _series(rows: dict[date, int], days: list[date]) -> list[int]:
    return [int(rows.get(day, 0)) for day in days]


def day_counts(*, org_id: int, after: int, upto: int) -> list[dict[str, Any]]:
    """Per day received: the org's entries with ``after < seq <= upto`` (an index range on
    ``(org, seq)``)."""
    return list(
        MirrorEntry.objects.filter(org_id=org_id, seq__gt=after, seq__lte=upto)
        .annotate(day=TruncDate("received_at"))
        .values("day")
        .annotate(
            receipts=Count("id"),
            l1=Count("id", filter=Q(trust_level="L1")),
            supersedes=Count("id", filter=~Q(supersedes_action_hash="")),
        )
    )


@dataclass
class DayCounts:
    receipts: int = 0
    l1: int = 0
    supersedes: int = 0


def receipt_days(*, org: Org, upto: int) -> dict[date, DayCounts]:
    """The org's mirrored receipts per day received, from entry 1 to ``upto`` (its head's
    size, read before): the rollups folded so far plus the entries past their cursor.

    The cursor and the rollups are read in one statement (one snapshot), so a fold
    committing meanwhile is either wholly seen or not at all; the head only grows, so the
    tail ``(cursor, upto]`` is never negative. The cost is the cursor's lag, not the org's
    size."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.seq, r.day, r.receipts, r.l1, r.supersedes "
            "FROM analytics_rollupcursor c "
            "LEFT JOIN analytics_dailyrollup r ON r.org_id = c.org_id "
            "WHERE c.org_id = %s",
            [org.pk],
        )
        rows = cursor.fetchall()
    folded = rows[0][0] if rows else 0
    days: dict[date, DayCounts] = {}
    for _, day, receipts, l1, supersedes in rows:
        if day is not None:
            day = day if isinstance(day, date) else date.fromisoformat(str(day))
            days[day] = DayCounts(int(receipts), int(l1), int(supersedes))
    if upto > folded:
        for row in day_counts(org_id=org.pk, after=folded, upto=upto):
            counts = days.setdefault(row["day"], DayCounts())
            counts.receipts += row["receipts"]
            counts.l1 += row["l1"]
            counts.supersedes += row["supersedes"]
    return days


def receipts_received_since(*, org: Org, day: date) -> int:
    """The org's mirrored receipts received on ``day`` (UTC) and after, from the rollups
    (``receipt_days``): what tells a policy replay whether its window is small enough to
    replay in the request, at the rollups' cost, never the org's size."""
    days = receipt_days(org=org, upto=mirror_head_get(org=org).size)
    return sum(counts.receipts for received, counts in days.items() if received >= day)


def analytics_counters(*, org: Org, now: datetime | None = None) -> list[StatCounter]:
    now = now or timezone.now()
    days = _days(now.date())

    stored = mirror_head_get(org=org)
    size, month, month_count = stored.size, stored.month, stored.month_count
    this_month = month_count if month == now.strftime("%Y-%m") else 0
    cap = org.effective_monthly_receipt_cap

    by_day = receipt_days(org=org, upto=size)
    receipts_spark = _series({d: r.receipts for d, r in by_day.items()}, days)
    l1_spark = _series({d: r.l1 for d, r in by_day.items()}, days)
    supersede_spark = _series({d: r.supersedes for d, r in by_day.items()}, days)
    l1_total = sum(row.l1 for row in by_day.values())
    supersedes_total = sum(row.supersedes for row in by_day.values())

    refusals = list(RefusalCount.objects.filter(org=org).values_list("day", "kind", "count"))
    refusal_total = sum(count for _, _, count in refusals)
    by_kind: dict[str, int] = {}
    refusal_days: dict[date, int] = {}
    for day, kind, count in refusals:
        by_kind[kind] = by_kind.get(kind, 0) + count
        refusal_days[day] = refusal_days.get(day, 0) + count
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(by_kind.items()))

    by_approval_day = approval_days(org=org, now=now)
    approvals = ApprovalDay()
    for counts in by_approval_day.values():
        approvals.add(counts)
    pending = approvals.opened - approvals.settled
    window = ApprovalDay()
    for day in days:
        window.add(by_approval_day.get(day, ApprovalDay()))
    average = window.decision_micros / window.decided / 1_000_000 if window.decided else None
    opened_daily = {d: c.opened for d, c in by_approval_day.items()}
    approved_days = {d: c.approved for d, c in by_approval_day.items()}
    rejected_days = {d: c.rejected for d, c in by_approval_day.items()}
    decided_days = {d: c.decided for d, c in by_approval_day.items()}
    # Settled without a human's decision: beside the rejections (the approval pages show an
    # approval the agent closed itself as rejected, with its local decision).
    others = [
        f"{count:,} {what}"
        for count, what in (
            (approvals.expired, "more expired undecided"),
            (approvals.decided_locally, "closed by the agent without a signed decision"),
        )
        if count
    ]
    rejected_note = f" ({', '.join(others)})" if others else ""

    activated = PolicyHead.objects.filter(org=org).values_list("activated_at", flat=True).first()
    policy_age = (now - activated).days if activated else None

    return [
        StatCounter("receipts_total", "Receipts mirrored", size, f"{size:,}", receipts_spark),
        StatCounter(
            "receipts_month",
            "Receipts this month",
            this_month,
            f"{this_month:,} / {cap:,} ({100 * this_month / cap:.1f}% of quota)"
            if cap
            else f"{this_month:,} / 0",
            receipts_spark,
        ),
        StatCounter("receipts_l1", "Human-approved (L1)", l1_total, f"{l1_total:,}", l1_spark),
        StatCounter(
            "refusals",
            f"Refused pushes ({kinds})" if kinds else "Refused pushes",
            refusal_total,
            f"{refusal_total:,}",
            _series(refusal_days, days),
        ),
        StatCounter(
            "supersedes",
            "Superseded by L1",
            supersedes_total,
            f"{supersedes_total:,}",
            supersede_spark,
        ),
        StatCounter(
            "approvals_pending",
            "Approvals pending",
            pending,
            f"{pending:,}",
            _series(opened_daily, days),
        ),
        StatCounter(
            "approvals_approved",
            "Approvals approved",
            approvals.approved,
            f"{approvals.approved:,}",
            _series(approved_days, days),
        ),
        StatCounter(
            "approvals_rejected",
            f"Approvals rejected{rejected_note}",
            approvals.rejected,
            f"{approvals.rejected:,}",
            _series(rejected_days, days),
        ),
        # The key keeps its first name for the clients that read it; the value is the
        # average, which the rollups keep exactly (a median would need every duration).
        StatCounter(
            "approval_median_seconds",
            "Average time to decision (30 days)",
            average,
            _duration(average),
            _series(decided_days, days),
        ),
        StatCounter(
            "policy_age_days",
            "Days since the active policy was deployed",
            policy_age,
            f"{policy_age} d" if policy_age is not None else "no policy (fail-safe pin)",
            [],
        ),
    ]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "no decisions yet"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
