"""The org dashboard page of the console: counters with sparklines, the approval queue,
the active policy with its history, quota use. Server-rendered; no external assets."""

from __future__ import annotations

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from apps.analytics.selectors import analytics_counters
from apps.approvals.models import Approval, ApprovalStatus
from apps.policy.models import PolicyVersion
from apps.policy.selectors import policy_active, policy_history
from apps.tenancy.models import Org

WIDTH, HEIGHT = 120, 28


def sparkline_svg(values: list[int]) -> SafeString:
    """An inline SVG polyline of ``values`` (empty series: an empty chart)."""
    if not values:
        return format_html('<svg width="{}" height="{}" role="img"></svg>', WIDTH, HEIGHT)
    top = max(values) or 1
    step = WIDTH / max(1, len(values) - 1)
    points = " ".join(
        f"{index * step:.1f},{HEIGHT - 2 - (value / top) * (HEIGHT - 4):.1f}"
        for index, value in enumerate(values)
    )
    return format_html(
        '<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{}"/></svg>',
        WIDTH, HEIGHT, WIDTH, HEIGHT, f"last {len(values)} days", points,
    )  # fmt: skip


def org_dashboard(request: HttpRequest, org: Org, context: dict[str, object]) -> TemplateResponse:
    counters = analytics_counters(org=org)
    cards = format_html_join(
        "",
        '<div class="card"><div class="label">{}</div><div class="value">{}</div>{}</div>',
        ((c.label, c.display, sparkline_svg(c.spark)) for c in counters),
    )
    pending = Approval.objects.filter(org=org, status=ApprovalStatus.PENDING).order_by(
        "created_at"
    )[:50]
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
        }
    )
    return TemplateResponse(request, "admin/tenancy/org/dashboard.html", context)
