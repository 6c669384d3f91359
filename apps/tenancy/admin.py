"""The console's tenancy pages. Every write goes through apps.tenancy.services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.common.errors import DomainError
from apps.tenancy.models import DEFAULT_SCOPES, ApiKey, Membership, Org, Scope
from apps.tenancy.services import api_key_issue, api_key_revoke, membership_add


@admin.register(Org)
class OrgAdmin(admin.ModelAdmin[Org]):
    list_display = ["slug", "name", "plan", "created_at"]
    fieldsets = [
        (None, {"fields": ["slug", "name", "plan"]}),
        (
            "Limits (empty: the plan's default)",
            {"fields": ["monthly_receipt_cap", "rate_per_minute", "rate_burst"]},
        ),
    ]
    search_fields = ["slug", "name"]
    list_filter = ["plan"]


class ApiKeyIssueForm(forms.ModelForm[ApiKey]):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[scope.value for scope in DEFAULT_SCOPES],
    )

    class Meta:
        model = ApiKey
        fields = ["org", "label", "scopes"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin[ApiKey]):
    list_display = ["prefix", "org", "label", "scopes", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["org", "revoked_at"]
    search_fields = ["prefix", "label", "org__slug"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected"]

    def get_form(
        self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[ApiKey]]:
        if obj is None:
            kwargs["form"] = ApiKeyIssueForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("org", "label", "scopes")
        return ("org", "label", "prefix", "scopes", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApiKey | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("org", "prefix", "scopes", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            ApiKey.objects.filter(pk=obj.pk).update(label=obj.label)
            return
        issued = api_key_issue(org=obj.org, scopes=form.cleaned_data["scopes"], label=obj.label)
        obj.pk = issued.api_key.pk
        messages.warning(
            request,
            f"API key issued. Copy it now, it is not shown again: {issued.secret}",
        )

    @admin.action(description="Revoke selected API keys")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(prefix=key.prefix)
        self.message_user(request, f"Revoked {queryset.count()} key(s).", messages.SUCCESS)

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        # Keys are revoked, never deleted: receipts keep a reference to the key that pushed them.
        return False


class MembershipForm(forms.ModelForm[Membership]):
    username = forms.CharField(max_length=150, help_text="Created if it does not exist yet.")

    class Meta:
        model = Membership
        fields = ["org", "role"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin[Membership]):
    list_display = ["user", "org", "role", "created_at"]
    list_filter = ["org", "role"]
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
        username = form.cleaned_data.get("username") or obj.user.get_username()
        try:
            saved = membership_add(org=obj.org, username=username, role=obj.role)
        except DomainError as error:
            messages.error(request, error.message)
            return
        obj.pk, obj.user = saved.pk, saved.user
