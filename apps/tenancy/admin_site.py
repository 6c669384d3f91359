"""The console's admin site: Django's, themed by django-unfold, with its sign-in throttled.

Failed sign-ins are counted per client address and per username
(``apps.tenancy.credential_limits``); a POST to the login page past either limit is
answered 429 with ``Retry-After`` before the password is hashed or the user looked up.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers
from unfold.sites import UnfoldAdminSite

from apps.tenancy.credential_limits import seconds_locked


class ConsoleAdminSite(UnfoldAdminSite):
    site_title = settings.PRODUCT_NAME
    site_header = settings.PRODUCT_NAME
    index_title = "Console"
    site_url = "/"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """The index, with a link to each visible org's dashboard above the app list."""
        from apps.tenancy.admin_access import member_roles
        from apps.tenancy.models import Org

        orgs = Org.objects.order_by("slug")
        if not request.user.is_superuser:
            orgs = orgs.filter(pk__in=list(member_roles(request)))
        context = {"org_dashboards": list(orgs[:50]), **(extra_context or {})}
        return super().index(request, context)

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


class ConsoleAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`ConsoleAdminSite` as ``admin.site``."""

    default_site = "apps.tenancy.admin_site.ConsoleAdminSite"
