"""The console's org pages: each org's dashboard, its fleet (which agent enforces which
policy version), its evidence download and a dashboard session token for scripts, on the
org admin.

They live here, above the feature apps, because the dashboard reads analytics and the
download is the audit app's evidence export; org writes still go through
apps.tenancy.services.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from apps.analytics.console import org_dashboard
from apps.audit.evidence import evidence_export, evidence_response, parse_window
from apps.common.errors import DomainError
from apps.console.fleet import org_fleet_page
from apps.tenancy.admin_access import OrgScopedAdmin, can_write
from apps.tenancy.audit_trail import Actor
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.middleware import activate_console_orgs
from apps.tenancy.models import Org, Role
from apps.tenancy.services import org_create, org_set_limits, org_set_policy_quorum


@admin.register(Org)
class OrgAdmin(OrgScopedAdmin[Org]):
    org_lookup = "pk"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)  # creating tenants is an operator's act

    def has_change_permission(self, request: HttpRequest, obj: Org | None = None) -> bool:
        # Plan and limits decide what an org may consume: an operator's act too. Members
        # see their org (and its dashboard) read-only.
        return bool(request.user.is_superuser)

    @admin.display(description="Dashboard")
    def dashboard_link(self, obj: Org) -> str:
        return format_html(
            '<a href="{}">dashboard</a>', reverse("admin:tenancy_org_dashboard", args=[obj.pk])
        )

    @admin.display(description="Fleet")
    def fleet_link(self, obj: Org) -> str:
        return format_html(
            '<a href="{}">fleet</a>', reverse("admin:tenancy_org_fleet", args=[obj.pk])
        )

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:org_id>/dashboard/", wrap(self.dashboard_view),
                 name="tenancy_org_dashboard"),
            path("<int:org_id>/fleet/", wrap(self.fleet_view), name="tenancy_org_fleet"),
            path("fleet/", wrap(self.fleets_view), name="tenancy_org_fleets"),
            path("<int:org_id>/session-token/", wrap(self.session_token_view),
                 name="tenancy_org_session_token"),
            path("<int:org_id>/evidence/", wrap(self.evidence_view),
                 name="tenancy_org_evidence"),
            path("<int:org_id>/policy-quorum/", wrap(self.policy_quorum_view),
                 name="tenancy_org_policy_quorum"),
            *super().get_urls(),
        ]  # fmt: skip

    def _visible_org(self, request: HttpRequest, org_id: int) -> Org:
        org = self.get_queryset(request).filter(pk=org_id).first()
        if org is None:
            raise Http404("no such org")
        return org

    def dashboard_view(self, request: HttpRequest, org_id: int) -> HttpResponse:
        org = self._visible_org(request, org_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "can_write": can_write(request, org.pk),
            "can_export": can_write(request, org.pk, Role.AUDITOR),
            "can_set_quorum": can_write(request, org.pk, Role.OWNER),
        }
        return org_dashboard(request, org, context)

    def fleet_view(self, request: HttpRequest, org_id: int) -> HttpResponse:
        """Which agents enforce which policy version (every member may read it)."""
        org = self._visible_org(request, org_id)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"{org.name} ({org.slug})",
            "org": org,
            "page": org_fleet_page(org=org),
        }
        return TemplateResponse(request, "admin/tenancy/org/fleet.html", context)

    def fleets_view(self, request: HttpRequest) -> HttpResponse:
        """The sidebar's entry: the member's org's fleet, or the list of orgs to pick from."""
        orgs = list(self.get_queryset(request).order_by("slug")[:2])
        if len(orgs) == 1:
            return HttpResponseRedirect(reverse("admin:tenancy_org_fleet", args=[orgs[0].pk]))
        return HttpResponseRedirect(reverse("admin:tenancy_org_changelist"))

    def evidence_view(self, request: HttpRequest, org_id: int) -> HttpResponseBase:
        """The evidence tar (the service behind POST /v1/evidence/export), auditor+ (POST),
        streamed like the API's."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        org = self._visible_org(request, org_id)
        if not can_write(request, org.pk, Role.AUDITOR):
            raise PermissionDenied
        start, end = request.POST.get("from") or None, request.POST.get("to") or None
        try:
            window = parse_window(start, end)
        except DomainError as error:
            self.message_user(request, f"Refused: {error.message}", messages.ERROR)
            return HttpResponseRedirect(reverse("admin:tenancy_org_dashboard", args=[org.pk]))
        archive = evidence_export(org=org, window=window, actor=Actor.console(request.user))
        return evidence_response(archive, org=org)

    def policy_quorum_view(self, request: HttpRequest, org_id: int) -> HttpResponseBase:
        """Set the org's policy quorum from its dashboard (owner, POST)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        org = self._visible_org(request, org_id)
        if not can_write(request, org.pk, Role.OWNER):
            raise PermissionDenied
        back = HttpResponseRedirect(reverse("admin:tenancy_org_dashboard", args=[org.pk]))
        raw = request.POST.get("policy_quorum", "")
        try:
            org_set_policy_quorum(
                org=org,
                quorum=int(raw) if raw.strip().isdigit() else -1,
                actor=Actor.console(request.user),
            )
        except DomainError as error:
            self.message_user(request, f"Refused: {error.message}", messages.ERROR)
            return back
        self.message_user(request, f"Policy changes now need {org.policy_quorum} approval(s).")
        return back

    def session_token_view(self, request: HttpRequest, org_id: int) -> HttpResponse:
        """A dashboard session JWT for the signed-in member, for scripts (POST only)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        org = self._visible_org(request, org_id)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": f"Session token for {org.slug}",
            "opts": self.model._meta,
        }
        try:
            context["tokens"] = console_tokens_issue(
                user=request.user,  # type: ignore[arg-type]
                org_slug=org.slug,
                via="console",
            )
        except DomainError as error:
            context["refusal"] = f"{error.message} (only members of the org get a token)."
        finally:
            activate_console_orgs(request)
        return TemplateResponse(request, "admin/tenancy/org/session_token.html", context)

    def get_readonly_fields(self, request: HttpRequest, obj: Org | None = None) -> list[str]:
        return ["slug", "name"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Org, form: Any, change: bool) -> None:
        """Through the services, so the act is validated and in the org's audit trail."""
        actor = Actor.console(request.user)
        if not change:
            created = org_create(slug=obj.slug, name=obj.name, plan=obj.plan, actor=actor)
            obj.pk, obj.created_at = created.pk, created.created_at
            fields = (
                "monthly_receipt_cap", "rate_per_minute", "rate_burst", "receipt_retention_days",
            )  # fmt: skip
            limits = {name: getattr(obj, name) for name in fields if getattr(obj, name) is not None}
            if limits:
                org_set_limits(org=created, actor=actor, **limits)
            return
        stored = Org.objects.get(pk=obj.pk)
        org_set_limits(
            org=stored, plan=obj.plan, monthly_receipt_cap=obj.monthly_receipt_cap,
            rate_per_minute=obj.rate_per_minute, rate_burst=obj.rate_burst,
            receipt_retention_days=obj.receipt_retention_days, actor=actor,
        )  # fmt: skip

    list_display = ["slug", "name", "plan", "created_at", "dashboard_link", "fleet_link"]
    fieldsets = [
        (None, {"fields": ["slug", "name", "plan"]}),
        (
            "Limits (empty: the plan's default)",
            {
                "fields": [
                    "monthly_receipt_cap",
                    "rate_per_minute",
                    "rate_burst",
                    "receipt_retention_days",
                ]
            },
        ),
    ]
    search_fields = ["slug", "name"]
    list_filter = ["plan"]
