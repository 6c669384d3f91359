"""Who may see and change what in the console (the Django admin).

A superuser operates the whole service. Any other staff user works through their
memberships: they see the rows of their orgs (row-level security enforces the same at the
database) and change them only where their role is manager or higher. Every console change
is recorded in the admin log (``LogEntry``), which nobody can edit from the console.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from unfold.admin import ModelAdmin as UnfoldModelAdmin

from apps.common.errors import DomainError
from apps.tenancy.models import Membership, Org, Role

M = TypeVar("M", bound=Model)
# Set on the request while a keyset list applies its filters to rows its branches found
# (apps.tenancy.admin_paging): the org filter leaves the org to the branches.
ROWS_BY_PK = "_keyset_rows_by_pk"


def member_roles(request: HttpRequest) -> dict[int, Role]:
    """The signed-in user's role per org id (cached on the request)."""
    cached: dict[int, Role] | None = getattr(request, "_member_roles", None)
    if cached is None:
        cached = {
            org_id: Role(role)
            for org_id, role in Membership.objects.filter(user_id=request.user.pk or 0).values_list(
                "org_id", "role"
            )
        }
        request._member_roles = cached  # type: ignore[attr-defined]
    return cached


def role_in(request: HttpRequest, org_id: int) -> Role | None:
    """The signed-in user's role in ``org_id`` (superusers: owner everywhere)."""
    if request.user.is_superuser:
        return Role.OWNER
    return member_roles(request).get(org_id)


def can_write(request: HttpRequest, org_id: int | None, role: Role = Role.MANAGER) -> bool:
    if request.user.is_superuser:
        return True
    roles = member_roles(request)
    if org_id is None:
        return any(member.at_least(role) for member in roles.values())
    return org_id in roles and roles[org_id].at_least(role)


def writable_orgs(request: HttpRequest, role: Role = Role.MANAGER) -> QuerySet[Org]:
    if request.user.is_superuser:
        return Org.objects.all()
    ids = [org_id for org_id, member in member_roles(request).items() if member.at_least(role)]
    return Org.objects.filter(pk__in=ids)


class OrgFilter(admin.SimpleListFilter):
    """Filter by org, offering only the orgs the signed-in user sees (the stock related
    filter would list every org, and the stock "related only" one scans the table)."""

    title = "org"
    parameter_name = "org"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        orgs = Org.objects.order_by("slug")
        if not request.user.is_superuser:
            orgs = orgs.filter(pk__in=list(member_roles(request)))
        return [(str(pk), slug) for pk, slug in orgs.values_list("pk", "slug")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value or not value.isdigit() or getattr(request, ROWS_BY_PK, False):
            return queryset
        lookup = getattr(self.model_admin, "org_lookup", "org_id")
        return queryset.filter(**{lookup: int(value)})

    def __init__(self, request: HttpRequest, params: Any, model: Any, model_admin: Any) -> None:
        self.model_admin = model_admin
        super().__init__(request, params, model, model_admin)


class OrgScopedAdmin(UnfoldModelAdmin, admin.ModelAdmin[M], Generic[M]):
    """Membership-based permissions for a model with an ``org`` (``org_lookup``), on the
    console's theme (django-unfold's ModelAdmin)."""

    org_lookup = "org_id"
    write_role = Role.MANAGER

    def _org_id(self, obj: M | None) -> int | None:
        if obj is None:
            return None
        value: Any = obj
        for part in self.org_lookup.split("__"):
            value = getattr(value, part)
        return int(value) if value is not None else None

    def unscoped_queryset(self, request: HttpRequest) -> QuerySet[M]:
        """The admin's queryset before the filter of the user's orgs (row-level security
        still applies in the database)."""
        return super().get_queryset(request)

    def get_queryset(self, request: HttpRequest) -> QuerySet[M]:
        queryset = self.unscoped_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.org_lookup}__in": list(member_roles(request))})

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser or member_roles(request))

    def has_view_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        if request.user.is_superuser:
            return True
        if obj is None:
            return bool(member_roles(request))
        return self._org_id(obj) in member_roles(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return can_write(request, None, self.write_role)

    def has_change_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return can_write(request, self._org_id(obj), self.write_role)

    def has_delete_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # A service refusal raised from save_model rolls back the admin's transaction (so
        # no half-written row and no admin log entry for what did not happen) and is shown
        # as an error on the same page.
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as error:
            self.message_user(request, f"Refused: {error.message}", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # An action's service refusal (each service is its own transaction) is a message.
        try:
            return super().changelist_view(request, extra_context)
        except DomainError as error:
            self.message_user(request, f"Refused: {error.message}", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "org":
            kwargs["queryset"] = writable_orgs(request, self.write_role)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
