"""The console's tenancy pages. Every write goes through apps.tenancy.services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.db.models import QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import reverse
from unfold.widgets import UnfoldAdminCheckboxSelectMultipleWidget, UnfoldAdminTextInputWidget

from apps.common.errors import DomainError
from apps.tenancy.admin_access import OrgFilter, OrgScopedAdmin, can_write
from apps.tenancy.admin_paging import KeysetAdmin
from apps.tenancy.audit_trail import ACTOR_VIAS, Actor
from apps.tenancy.models import (
    DEFAULT_SCOPES,
    ApiKey,
    Membership,
    OrgAuditEvent,
    Scope,
)
from apps.tenancy.services import (
    IssuedKey,
    api_key_issue,
    api_key_revoke,
    api_key_rotate,
    membership_add,
    membership_remove,
)


class ApiKeyIssueForm(forms.ModelForm[ApiKey]):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=UnfoldAdminCheckboxSelectMultipleWidget,
        initial=[scope.value for scope in DEFAULT_SCOPES],
    )

    class Meta:
        model = ApiKey
        fields = ["org", "label", "scopes"]


@admin.register(ApiKey)
class ApiKeyAdmin(OrgScopedAdmin[ApiKey]):
    list_display = ["prefix", "org", "label", "scopes_shown", "created_at", "last_used_at",
                    "revoked_at"]  # fmt: skip
    list_filter = [OrgFilter, "revoked_at"]
    search_fields = ["prefix", "label", "org__slug"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected", "rotate_selected"]

    def get_form(
        self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[ApiKey]]:
        if obj is None:
            kwargs["form"] = ApiKeyIssueForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("org", "label", "scopes")
        return ("org", "label", "prefix", "scopes_shown", "created_at", "last_used_at",
                "revoked_at")  # fmt: skip

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApiKey | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else self.get_fields(request, obj)

    @admin.display(description="Scopes")
    def scopes_shown(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes or []) or "none"

    def has_change_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        # A key is issued, revoked or rotated (the actions), never edited.
        return False if obj is not None else super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        issued = api_key_issue(
            org=obj.org,
            scopes=form.cleaned_data["scopes"],
            label=obj.label,
            actor=Actor.console(request.user),
        )
        obj.pk = issued.api_key.pk
        obj.prefix = issued.api_key.prefix
        request._issued_keys = [(None, issued)]  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        issued = getattr(request, "_issued_keys", None)
        if issued:
            return self._secrets_page(request, "API key issued", issued)
        return super().response_add(request, obj, post_url_continue)

    def _secrets_page(
        self, request: HttpRequest, title: str, issued: list[tuple[str | None, IssuedKey]]
    ) -> HttpResponse:
        """The new secrets, in this response only: never in a message (a cookie or the
        session would carry them on), never stored (only their digests are)."""
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            # The SDK's endpoint: this service, at the address the console is reached by.
            "endpoint": request.build_absolute_uri("/").rstrip("/"),
            "issued": [
                {"replaces": old, "prefix": new.api_key.prefix, "org": new.api_key.org,
                 "scopes": new.api_key.scopes, "label": new.api_key.label,
                 "secret": new.secret}
                for old, new in issued
            ],
        }  # fmt: skip
        response = TemplateResponse(request, "admin/tenancy/apikey/secret_once.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected API keys")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        done = 0
        for key in queryset:
            if not can_write(request, key.org_id):
                messages.error(request, f"{key.prefix}: needs the manager role in {key.org}")
                continue
            api_key_revoke(prefix=key.prefix, actor=Actor.console(request.user))
            done += 1
        self.message_user(request, f"Revoked {done} key(s).", messages.SUCCESS)

    @admin.action(description="Rotate selected API keys (new secret, same scopes; old revoked)")
    def rotate_selected(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> HttpResponse | None:
        rotated: list[tuple[str | None, IssuedKey]] = []
        for key in queryset:
            if not can_write(request, key.org_id) or key.revoked_at is not None:
                messages.error(request, f"{key.prefix}: not rotated (revoked, or not a manager)")
                continue
            issued = api_key_rotate(prefix=key.prefix, actor=Actor.console(request.user))
            rotated.append((key.prefix, issued))
        if not rotated:
            return None
        return self._secrets_page(request, "API keys rotated", rotated)

    # Keys are revoked, never deleted: receipts keep a reference to the key that pushed them.


class MembershipForm(forms.ModelForm[Membership]):
    username = forms.CharField(
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        widget=UnfoldAdminTextInputWidget,
        help_text=(
            "A new account is created. An existing account joins by invitation "
            "(for now, a superuser adds it)."
        ),
    )

    class Meta:
        model = Membership
        fields = ["org", "role"]


@admin.register(Membership)
class MembershipAdmin(OrgScopedAdmin[Membership]):
    list_display = ["user", "org", "role", "created_at"]
    list_filter = [OrgFilter, "role"]
    search_fields = ["user__username", "org__slug"]

    def get_form(
        self,
        request: HttpRequest,
        obj: Membership | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[Membership]]:
        if obj is None:
            kwargs["form"] = MembershipForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Membership | None = None) -> tuple[str, ...]:
        return ("org", "username", "role") if obj is None else ("user", "org", "role")

    def get_readonly_fields(
        self, request: HttpRequest, obj: Membership | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else ("user", "org")

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        # Added or changed, one service and its one rule (roles above the user's own, the
        # last owner); a refusal is shown on the form's page (OrgScopedAdmin).
        username = form.cleaned_data.get("username") or obj.user.get_username()
        saved = membership_add(
            org=obj.org, username=username, role=obj.role, actor=Actor.console(request.user)
        )
        obj.pk, obj.user = saved.pk, saved.user

    # Removal: one membership at a time, through the service (its rule, and the member's
    # session tokens end). The bulk delete action would log deletions before refusing.
    def has_delete_permission(self, request: HttpRequest, obj: Membership | None = None) -> bool:
        return can_write(request, self._org_id(obj), self.write_role)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        membership_remove(
            org=obj.org, username=obj.user.get_username(), actor=Actor.console(request.user)
        )

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Django's delete view is one transaction: a refusal leaves no row and no log entry.
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as error:
            self.message_user(request, f"Refused: {error.message}", messages.ERROR)
            return HttpResponseRedirect(
                reverse("admin:tenancy_membership_change", args=[object_id])
            )


class ViaFilter(admin.SimpleListFilter):
    """The audit rows made through one way in (``ACTOR_VIAS``, a fixed vocabulary). The
    stock filter of a field without choices lists the values it finds: a DISTINCT over the
    org's whole trail on every page."""

    title = "via"
    parameter_name = "via"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(via, via) for via in ACTOR_VIAS]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[OrgAuditEvent]
    ) -> QuerySet[OrgAuditEvent]:
        value = self.value()
        return queryset.filter(via=value) if value in ACTOR_VIAS else queryset


@admin.register(OrgAuditEvent)
class OrgAuditEventAdmin(KeysetAdmin, OrgScopedAdmin[OrgAuditEvent]):
    """The org's audit trail of operator acts, whoever made them (console, API, command),
    written by the services in the transaction of each change. Nobody edits it. One org at
    a time, paged by (at, id) on the (org, at) index; kind and via look through a window."""

    list_display = ["at", "org", "kind", "summary", "via", "actor"]
    list_filter = [OrgFilter, "kind", ViaFilter]
    keyset = ("-at", "-id")
    search_fields = ["summary", "kind", "actor"]
    readonly_fields = ["at", "org", "kind", "summary", "detail", "via", "actor", "user", "api_key"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: OrgAuditEvent | None = None) -> bool:
        return False
