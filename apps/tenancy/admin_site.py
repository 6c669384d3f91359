"""The console's admin site: Django's, themed by django-unfold, with its sign-in throttled.

Failed sign-ins are counted per client address and per username
(``apps.tenancy.credential_limits``); a POST to the login page past either limit is
answered 429 with ``Retry-After`` before the password is hashed or the user looked up.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.cache import add_never_cache_headers
from unfold.sites import UnfoldAdminSite

from apps.tenancy.credential_limits import seconds_locked

# The sidebar, grouped by what a member comes to do. Entries are admin models ("app.model")
# or named console pages; each shows only to whoever may open it. A registered model that
# is in no group here is listed under "More"; SYSTEM holds the service's internal tables,
# shown to superusers only.
JOBS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Receipts", [("receipts.mirrorentry", "Mirrored receipts"),
                  ("url:console-verify", "Verify a receipt"),
                  ("audit.receiptarchive", "Receipt archives")]),
    ("Approvals", [("approvals.approval", "Approval queue"),
                   ("approvals.approverkey", "Approver keys"),
                   ("approvals.approvalescalation", "Approval escalations"),
                   ("url:console-approver-key", "Your approver devices")]),
    ("Policy", [("policy.policyversion", "Policy versions"),
                ("url:admin:policy_policyversion_preview", "Preview a draft"),
                ("policy.policydeployment", "Deployments"),
                ("policy.policyproposal", "Co-signed changes"),
                ("url:admin:tenancy_org_fleets", "Fleet: who enforces what")]),
    ("Keys and members", [("tenancy.apikey", "API keys"),
                          ("tenancy.membership", "Memberships"),
                          ("tenancy.invitation", "Invitations"),
                          ("tenancy.ssoconfig", "Single sign-on"),
                          ("tenancy.scimtoken", "Provisioning (SCIM) tokens"),
                          ("tenancy.orgauditevent", "Org audit trail"),
                          ("audit.legalhold", "Legal holds"),
                          ("tenancy.org", "Orgs")]),
    ("Notifications", [("events.webhookendpoint", "Webhook endpoints"),
                       ("events.delivery", "Webhook deliveries"),
                       ("events.emailsubscription", "Email subscriptions"),
                       ("audit.evidenceexportjob", "Evidence exports")]),
    ("Transparency", [("transparency.checkpoint", "Checkpoints"),
                      ("transparency.witness", "Witnesses"),
                      ("transparency.orglog", "Org logs")]),
]  # fmt: skip
# Pages open only to whoever may add that model (the preview: managers and up, as deploying).
NEEDS_ADD = {"url:admin:policy_policyversion_preview": "policy.policyversion"}
SYSTEM = [
    ("admin.logentry", "Admin log"),
    ("auth.user", "Users"),
    ("auth.group", "Groups"),
    ("django_tasks_database.dbtaskresult", "Background task results"),
    ("token_blacklist.outstandingtoken", "Issued refresh tokens"),
    ("token_blacklist.blacklistedtoken", "Revoked refresh tokens"),
]


class ConsoleAdminSite(UnfoldAdminSite):
    site_title = settings.PRODUCT_NAME
    site_header = settings.PRODUCT_NAME
    index_title = "Console"
    site_url = "/"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """Signing in lands on the org's dashboard; with several orgs, on a picker of them."""
        # This module is loaded with INSTALLED_APPS (ConsoleAdminConfig), before any model
        # class exists: the models are imported once a request needs them.
        from apps.tenancy.admin_access import member_roles
        from apps.tenancy.models import Org

        orgs = Org.objects.order_by("slug")
        if not request.user.is_superuser:
            orgs = orgs.filter(pk__in=list(member_roles(request)))
        shown = list(orgs[:51])
        if len(shown) == 1:
            return HttpResponseRedirect(reverse("admin:tenancy_org_dashboard", args=[shown[0].pk]))
        context = {"org_dashboards": shown[:50], "title": "Choose an org", **(extra_context or {})}
        return super().index(request, context)

    def get_sidebar_list(self, request: HttpRequest) -> list[dict[str, Any]]:
        """The navigation by job (JOBS), then what no job lists, then SYSTEM (superusers)."""
        by_label = {model._meta.label_lower: admin for model, admin in self._registry.items()}
        placed = {entry for _, entries in JOBS for entry, _ in entries} | dict(SYSTEM).keys()
        more = [(label, str(admin.model._meta.verbose_name_plural).capitalize())
                for label, admin in sorted(by_label.items()) if label not in placed]  # fmt: skip
        groups = [*JOBS, ("More", more)]
        if request.user.is_superuser:
            groups.append(("System", SYSTEM))
        sidebar: list[dict[str, Any]] = []
        everything: list[dict[str, Any]] = []
        for title, entries in groups:
            items = [
                item for entry in entries if (item := self._nav_item(request, by_label, entry))
            ]
            if items:
                sidebar.append({"title": title, "items": items})
                everything.extend(items)
        # The entry whose link is the longest start of this page's path is the active one
        # (the signing key page, /approve/, is not the start of each approval's page).
        path = request.path
        matching = [
            item
            for item in everything
            if path == item["link"]
            or (item["link"] != "/approve/" and path.startswith(item["link"]))
        ]
        if matching:
            max(matching, key=lambda item: len(item["link"]))["active"] = True
        return sidebar

    def _nav_item(
        self, request: HttpRequest, by_label: dict[str, Any], entry: tuple[str, str]
    ) -> dict[str, Any] | None:
        target, title = entry
        if target in NEEDS_ADD:
            model_admin = by_label.get(NEEDS_ADD[target])
            if model_admin is None or not model_admin.has_add_permission(request):
                return None
        if target.startswith("url:"):
            try:
                link = reverse(target.removeprefix("url:"))
            except NoReverseMatch:
                return None
        else:
            model_admin = by_label.get(target)
            if model_admin is None or not model_admin.has_module_permission(request):
                return None
            if not model_admin.has_view_or_change_permission(request):
                return None
            meta = model_admin.model._meta
            link = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        return {"title": title, "link": link, "active": False, "has_permission": True}

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method == "POST":
            wait = seconds_locked(request, username=request.POST.get("username", ""))
            if wait is not None:
                return self._sign_in_paused(request, wait)
        return super().login(request, extra_context)

    def _sign_in_paused(self, request: HttpRequest, wait: int) -> HttpResponse:
        # Not each_context: its app list reads memberships, and a refusal does no database work.
        context: dict[str, Any] = {
            "site_title": self.site_title,
            "site_header": self.site_header,
            "site_url": self.site_url,
            "has_permission": False,
            "is_nav_sidebar_enabled": False,
            "available_apps": [],
            "title": "Sign-in paused",
            "retry_after": wait,
        }
        response = TemplateResponse(
            request, "admin/login_paused.html", context, status=HTTPStatus.TOO_MANY_REQUESTS
        )
        response["Retry-After"] = str(wait)
        add_never_cache_headers(response)  # as the sign-in page itself
        return response


# Third-party tables the service keeps for itself: registered by their packages with
# Django's plain admin, shown themed here, and to superusers only.
INTERNAL_TABLES = (
    "auth.group",
    "token_blacklist.outstandingtoken",
    "token_blacklist.blacklistedtoken",
    "django_tasks_database.dbtaskresult",
)


def _superusers_only(model_admin: Any, request: HttpRequest, *args: Any) -> bool:
    return bool(request.user.is_active and request.user.is_superuser)


def theme_internal_tables(site: Any) -> None:
    """Re-register each of INTERNAL_TABLES with its own admin class mixed with the theme's,
    so that its pages look like the console's, and visible to superusers only; a table
    that grows with the service's work gets a list that pages without counting it."""
    # unfold.admin defines model admins: it cannot load with this module (see index()).
    from unfold.admin import ModelAdmin as UnfoldModelAdmin

    from apps.tenancy.admin_task_results import TaskResultList

    paged_lists: dict[str, type] = {"django_tasks_database.dbtaskresult": TaskResultList}

    for model, model_admin in list(site._registry.items()):
        stock = type(model_admin)
        if model._meta.label_lower not in INTERNAL_TABLES or issubclass(stock, UnfoldModelAdmin):
            continue
        paged = paged_lists.get(model._meta.label_lower)
        themed = type(
            f"Themed{stock.__name__}",
            (paged, stock, UnfoldModelAdmin) if paged else (stock, UnfoldModelAdmin),
            {"has_module_permission": _superusers_only, "has_view_permission": _superusers_only},
        )
        site.unregister(model)
        site.register(model, themed)


class ConsoleAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`ConsoleAdminSite` as ``admin.site``."""

    default_site = "apps.tenancy.admin_site.ConsoleAdminSite"

    def ready(self) -> None:
        super().ready()  # every app's admin module is loaded: their registrations are made
        theme_internal_tables(admin.site)
