"""Console: deploy policy (same service as the API), preview it, roll back, compare."""

from __future__ import annotations

import difflib
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html

from apps.common.errors import DomainError
from apps.policy.errors import PolicyFloorBypass
from apps.policy.models import DeployChannel, PolicyDeployment, PolicyHead, PolicyVersion
from apps.policy.preview import policy_preview
from apps.policy.services import policy_deploy, policy_validate
from apps.tenancy.admin_access import OrgScopedAdmin, can_write, writable_orgs
from apps.tenancy.models import Org


def toml_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
    )
    return "".join(lines) or "(identical)"


def validated_toml(toml: str) -> str:
    """The TOML, or a form error naming why (and which rule) the deploy would be refused."""
    try:
        policy_validate(toml=toml)
    except PolicyFloorBypass as error:
        raise forms.ValidationError(f"{error.message} (rule {error.rule_id})") from None
    except DomainError as error:
        raise forms.ValidationError(error.message) from None
    return toml


class PolicyDeployForm(forms.ModelForm[PolicyVersion]):
    """Validated exactly as ``POST /v1/policy``: a parse error or a floor bypass is shown
    inline on the TOML, naming the rule."""

    toml = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "cols": 100}), strip=False,
                           required=False)  # fmt: skip

    class Meta:
        model = PolicyVersion
        fields = ["org", "toml"]

    def clean_toml(self) -> str:
        return validated_toml(self.cleaned_data.get("toml") or "")


class PolicyPreviewForm(forms.Form):
    org = forms.ModelChoiceField(queryset=Org.objects.none())
    toml = forms.CharField(widget=forms.Textarea(attrs={"rows": 20, "cols": 100}), strip=False,
                           required=False)  # fmt: skip
    days = forms.IntegerField(min_value=1, max_value=90, initial=7)

    def clean_toml(self) -> str:
        return validated_toml(self.cleaned_data.get("toml") or "")


@admin.register(PolicyVersion)
class PolicyVersionAdmin(OrgScopedAdmin[PolicyVersion]):
    list_display = ["policy_id", "org", "rule_count", "is_active", "created_at"]
    list_filter = ["org"]
    search_fields = ["policy_id", "policy_hash"]
    actions = ["roll_back_to_selected"]
    change_list_template = "admin/policy/policyversion/change_list.html"

    def get_form(
        self, request: HttpRequest, obj: PolicyVersion | None = None, change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[PolicyVersion]]:  # fmt: skip
        if obj is None:
            kwargs["form"] = PolicyDeployForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: PolicyVersion | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("org", "toml")
        return ("org", "policy_id", "policy_hash", "rule_count", "created_at", "is_active",
                "toml_text", "diff_with_previous", "deployments")  # fmt: skip

    def get_readonly_fields(
        self, request: HttpRequest, obj: PolicyVersion | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else self.get_fields(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: PolicyVersion | None = None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: PolicyVersion, form: Any, change: bool) -> None:
        version = policy_deploy(
            org=obj.org,
            toml=form.cleaned_data["toml"],
            deployed_by=request.user,  # type: ignore[arg-type]
            channel=DeployChannel.CONSOLE,
        )
        for field in ("pk", "policy_id", "policy_hash", "rule_count", "created_at"):
            setattr(obj, field, getattr(version, field))
        messages.success(request, f"Deployed {version.policy_id} for {obj.org}.")

    @admin.display(boolean=True, description="Active")
    def is_active(self, obj: PolicyVersion) -> bool:
        return PolicyHead.objects.filter(org_id=obj.org_id, version_id=obj.pk).exists()

    @admin.display(description="TOML")
    def toml_text(self, obj: PolicyVersion) -> str:
        return format_html("<pre>{}</pre>", obj.toml or "(empty: every action to a human)")

    @admin.display(description="Diff with the version it replaced")
    def diff_with_previous(self, obj: PolicyVersion) -> str:
        deployment = (
            PolicyDeployment.objects.filter(version=obj).select_related("previous_version").first()
        )
        previous = deployment.previous_version if deployment else None
        old = previous.toml if previous else ""
        name = previous.policy_id if previous else "(fail-safe empty policy)"
        return format_html("<pre>{}</pre>", toml_diff(old, obj.toml, name, obj.policy_id))

    @admin.display(description="Deployments")
    def deployments(self, obj: PolicyVersion) -> str:
        rows = PolicyDeployment.objects.filter(version=obj).select_related("deployed_by")
        return format_html(
            "<pre>{}</pre>",
            "\n".join(
                f"{row.deployed_at:%Y-%m-%d %H:%M:%S} by {row.deployed_by or '-'} via {row.channel}"
                for row in rows
            ) or "-",
        )  # fmt: skip

    @admin.action(description="Roll back to the selected version (re-deploy it)")
    def roll_back_to_selected(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> None:
        for version in queryset:
            if not can_write(request, version.org_id):
                messages.error(request, f"{version.policy_id}: needs the manager role")
                continue
            policy_deploy(
                org=version.org,
                toml=version.toml,
                deployed_by=request.user,  # type: ignore[arg-type]
                channel=DeployChannel.CONSOLE,
            )
            self.log_change(request, version, "Re-deployed (roll back)")
            messages.success(request, f"{version.org}: {version.policy_id} is active again.")

    def get_urls(self) -> list[Any]:
        preview = self.admin_site.admin_view(self.preview_view)
        return [path("preview/", preview, name="policy_policyversion_preview"), *super().get_urls()]

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """Replay recent receipts through a draft; nothing is deployed."""
        if not can_write(request, None):
            messages.error(request, "Previewing a policy needs the manager role.")
        form = PolicyPreviewForm(request.POST or None)
        form.fields["org"].queryset = writable_orgs(request)  # type: ignore[attr-defined]
        report = None
        if request.method == "POST" and form.is_valid():
            report = policy_preview(
                org=form.cleaned_data["org"],
                draft=policy_validate(toml=form.cleaned_data["toml"]),
                days=form.cleaned_data["days"],
                limit=10_000,
            )
        context = {**self.admin_site.each_context(request), "title": "Preview a policy",
                   "form": form, "report": report, "opts": self.model._meta,
                   "transitions": report.transitions.most_common() if report else []}  # fmt: skip
        return TemplateResponse(request, "admin/policy/policyversion/preview.html", context)


@admin.register(PolicyDeployment)
class PolicyDeploymentAdmin(OrgScopedAdmin[PolicyDeployment]):
    """The deploy history, read-only."""

    list_display = ["deployed_at", "org", "version", "previous_version", "deployed_by", "channel"]
    list_filter = ["org", "channel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: PolicyDeployment | None = None
    ) -> bool:
        return False
