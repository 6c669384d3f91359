"""The org dashboard page of the console: counters with sparklines, the approval queue,
the active policy with its history, quota use. Server-rendered; no external assets."""

from __future__ import annotations

from datetime import date, timedelta

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from apps.analytics.selectors import analytics_counters
from apps.approvals.models import ApproverKey
from apps.approvals.selectors import approval_queue
from apps.policy.models import PolicyVersion
from apps.policy.selectors import (
    policy_active,
    policy_break_glass_unapproved,
    policy_history,
    policy_proposal_open,
)
from apps.tenancy.models import Org

WIDTH, HEIGHT = 120, 28


def counter_links(org: Org) -> dict[str, str]:
    """Each counter's filtered list in the console (counters without one: not linked)."""
    receipts = f"{reverse('admin:receipts_mirrorentry_changelist')}?org={org.pk}"
    approvals = f"{reverse('admin:approvals_approval_changelist')}?org={org.pk}"
    return {
        "receipts_total": receipts,
        "receipts_month": f"{receipts}&received_at__gte={timezone.now():%Y-%m-01}",
        "receipts_l1": f"{receipts}&trust_level__exact=L1",
        "approvals_pending": f"{approvals}&status__exact=pending",
        "approvals_approved": f"{approvals}&status__exact=approved",
        "approvals_rejected": f"{approvals}&status__exact=rejected",
        "approval_median_seconds": f"{approvals}&status__exact=approved",
    }


def sparkline_dates(days: int) -> tuple[date, date]:
    today = timezone.now().date()
    return today - timedelta(days=days - 1), today


def sparkline_svg(values: list[int]) -> SafeString:
    """An inline SVG polyline of ``values`` (one a day, ending today), with its first and
    last dates under it (empty series: an empty chart)."""
    if not values:
        return format_html('<svg width="{}" height="{}" role="img"></svg>', WIDTH, HEIGHT)
    top = max(values) or 1
    step = WIDTH / max(1, len(values) - 1)
    points = " ".join(
        f"{index * step:.1f},{HEIGHT - 2 - (value / top) * (HEIGHT - 4):.1f}"
        for index, value in enumerate(values)
    )
    first, last = sparkline_dates(len(values))
    span = f"{first:%Y-%m-%d} to {last:%Y-%m-%d}, one point a day"
    return format_html(
        '<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<title>{}</title>'
        '<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{}"/></svg>'
        '<div class="spark-dates"><span>{}</span><span>{}</span></div>',
        WIDTH, HEIGHT, WIDTH, HEIGHT, f"last {len(values)} days: {span}", span, points,
        f"{first:%b %d}", f"{last:%b %d}",
    )  # fmt: skip


def org_approver_key_count(org: Org) -> int:
    return ApproverKey.objects.active().filter(org=org).count()


def org_dashboard(request: HttpRequest, org: Org, context: dict[str, object]) -> TemplateResponse:
    counters = analytics_counters(org=org)
    links = counter_links(org)
    cards = format_html_join(
        "",
        '<div class="card"><div class="label">{}</div><div class="value">{}</div>{}</div>',
        (
            (
                c.label,
                format_html(
                    '<a href="{}" title="the list it counts">{}</a>', links[c.key], c.display
                )
                if c.key in links
                else c.display,
                sparkline_svg(c.spark),
            )
            for c in counters
        ),
    )
    pending = approval_queue(org=org, limit=50)
    active = policy_active(org=org)
    history = policy_history(org=org, limit=20)
    context.update(
        {
            "title": f"{org.name} ({org.slug})",
            "org": org,
            "cards": cards,
            "pending": pending,
            "active": active,
            "history": history,
            "versions": PolicyVersion.objects.filter(org=org).order_by("-created_at")[:100],
            # The diff offered first: the active version against the one it replaced.
            "diff_old": history[0].previous_version_id if history else None,
            "month_count": next(c.value for c in counters if c.key == "receipts_month"),
            "cap": org.effective_monthly_receipt_cap,
            # The quota as its counter shows it: one format on the page.
            "month_shown": next(c.display for c in counters if c.key == "receipts_month"),
            "receipts_total": next(c.value for c in counters if c.key == "receipts_total"),
            "receipts_url": links["receipts_total"],
            "api_keys_url": reverse("admin:tenancy_apikey_changelist"),
            "approver_keys_url": reverse("admin:approvals_approverkey_changelist"),
            "approver_keys": org_approver_key_count(org),
            # Co-signed deploys: the quorum, the change waiting for it, and a break-glass
            # activation it has not approved (shown until it does, or it is replaced).
            "policy_quorum": org.policy_quorum,
            "open_proposal": policy_proposal_open(org=org),
            "break_glass": policy_break_glass_unapproved(org=org),
        }
    )
    return TemplateResponse(request, "admin/tenancy/org/dashboard.html", context)
