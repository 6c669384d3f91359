"""Org context for the console (the Django admin), which authenticates by session.

Console staff access is explicit: a superuser operates the whole service and sees every
org; any other staff member sees the orgs they are a member of, whatever their role (the
admin's own permissions decide what they may change). Row-level security enforces it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from apps.tenancy.models import Membership
from apps.tenancy.org_context import activate_all_orgs, activate_orgs


def member_org_ids(user_id: int) -> list[int]:
    """Every org ``user_id`` is a member of (resolved without an org context)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT mirror_member_orgs(%s)", [user_id])
            return [int(row[0]) for row in cursor.fetchall()]
    return list(Membership.objects.filter(user_id=user_id).values_list("org_id", flat=True))


class ConsoleOrgContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.console_prefix = reverse("admin:index")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(self.console_prefix):
            activate_console_orgs(request)
        return self.get_response(request)


def activate_console_orgs(request: HttpRequest) -> None:
    """The console's org context for the signed-in staff user (see the module docstring)."""
    user = request.user
    if user.is_authenticated and user.is_active and user.is_staff:
        if user.is_superuser:
            activate_all_orgs()
        else:
            activate_orgs(member_org_ids(user.pk))
