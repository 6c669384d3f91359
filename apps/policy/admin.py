"""Console: deploy policy (same service as the API), preview it, roll back, compare."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from unfold.widgets import (
    UnfoldAdminIntegerFieldWidget,
    UnfoldAdminSelectWidget,
    UnfoldAdminTextareaWidget,
)

from apps.common.errors import DomainError
from apps.policy.errors import PolicyFloorBypass
from apps.policy.models import (
    PolicyDeployment,
    PolicyHead,
    PolicyProposal,
    PolicyReplay,
    PolicyVersion,
    ProposalStatus,
    ReplayStatus,
)
from apps.policy.selectors import EMPTY_POLICY_HASH, policy_replay_report
from apps.policy.services import (
    PolicyChange,
    policy_deploy,
    policy_replay_request,
    policy_validate,
)
from apps.tenancy.admin_access import OrgFilter, OrgScopedAdmin, can_write, writable_orgs
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Org, Role

DIFF_LINE_STYLES = {"+": "background:#e6ffec", "-": "background:#ffebe9", "@": "color:#6e7781"}


def toml_diff(old: str, new: str, old_name: str, new_name: str) -> SafeString:
    """A unified diff of two policy texts, rendered: added, removed and hunk lines styled
    inline (the console loads no external assets)."""
    lines = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="")
    )
    if not lines:
        return format_html('<pre class="policy-diff">(identical)</pre>')
    rendered = format_html_join(
        "\n",
        '<span style="{}">{}</span>',
        ((DIFF_LINE_STYLES.get(line[:1], "") if not line.startswith(("+++", "---")) else
          "font-weight:bold", line) for line in lines),
    )  # fmt: skip
    return format_html('<pre class="policy-diff">{}</pre>', rendered)


def validated_toml(toml: str) -> str:
    """The TOML, or a form error naming why (and which rule) the deploy would be refused."""
    try:
        policy_validate(toml=toml)
    except PolicyFloorBypass as error:
        raise forms.ValidationError(
            f"{error.message} (rule {error.rule_id})", params={"rule_id": error.rule_id}
        ) from None
    except DomainError as error:
        raise forms.ValidationError(error.message) from None
    return toml


_AT_LINE = re.compile(r"at line (\d+)")
_RULE_INDEX = re.compile(r"rule\[(\d+)\]")


def policy_error_at(form: forms.BaseForm, toml: str) -> dict[str, Any] | None:
    """The TOML field's error as the page shows it at the top of the form: the message,
    and the line it points at (a parse error's line, the refused rule's ``id``, the n-th
    ``[[rule]]`` of a schema error), numbered, for the reader and for the caret."""
    errors = form.errors.as_data().get("toml") if form.is_bound else None
    if not errors:
        return None
    error = errors[0]
    message = " ".join(str(text) for text in error.messages)
    lines = toml.splitlines()
    number: int | None = None
    if found := _AT_LINE.search(message):
        number = int(found.group(1))
    elif rule_id := (error.params or {}).get("rule_id"):
        number = next((index for index, line in enumerate(lines, 1)
                       if re.match(rf"\s*id\s*=\s*[\"']{re.escape(str(rule_id))}[\"']", line)),
                      None)  # fmt: skip
    elif found := _RULE_INDEX.search(message):
        starts = [index for index, line in enumerate(lines, 1) if line.strip() == "[[rule]]"]
        wanted = int(found.group(1))
        number = starts[wanted] if wanted < len(starts) else None
    if number is not None and not 1 <= number <= len(lines):
        number = None
    return {"message": message, "line": number, "text": lines[number - 1] if number else ""}


def example_policy_toml() -> str:
    """The deploy form's starting text: the shipped example (deploy/examples/policy.toml)."""
    try:
        return (Path(settings.BASE_DIR) / "deploy" / "examples" / "policy.toml").read_text()
    except OSError:
        return ""


class PolicyDeployForm(forms.ModelForm[PolicyVersion]):
    """Validated exactly as ``POST /v1/policy``: a parse error or a floor bypass is shown
    inline on the TOML, naming the rule."""

    toml = forms.CharField(widget=UnfoldAdminTextareaWidget(attrs={"rows": 24, "cols": 100}),
                           strip=False, required=False, initial=example_policy_toml,
                           label="Policy (TOML)")  # fmt: skip

    class Meta:
        model = PolicyVersion
        fields = ["org", "toml"]

    def clean_toml(self) -> str:
        return validated_toml(self.cleaned_data.get("toml") or "")


class PolicyPreviewForm(forms.Form):
    org = forms.ModelChoiceField(queryset=Org.objects.none(), widget=UnfoldAdminSelectWidget)
    toml = forms.CharField(widget=UnfoldAdminTextareaWidget(attrs={"rows": 20, "cols": 100}),
                           strip=False, required=False, label="Draft policy (TOML)")  # fmt: skip
    days = forms.IntegerField(min_value=1, max_value=90, initial=7,
                              widget=UnfoldAdminIntegerFieldWidget,
                              label="Replay the receipts of the last (days)")  # fmt: skip

    def clean_toml(self) -> str:
        return validated_toml(self.cleaned_data.get("toml") or "")


def _tell(request: HttpRequest, deployed: PolicyChange, org: Org) -> None:
    """What a console deploy did: activated, or proposed to the org's approvers."""
    version = deployed.version
    if deployed.activated:
        messages.success(request, f"{org}: {version.policy_id} is active.")
        return
    assert deployed.proposal is not None
    messages.warning(
        request,
        format_html(
            "{}: {} is proposed: it activates once {} approver key(s) approve it on its "
            '<a href="{}">signing page</a>.',
            org, version.policy_id, deployed.proposal.quorum,
            reverse("console-policy-proposal", args=[version.policy_id]),
        ),
    )  # fmt: skip


@admin.register(PolicyVersion)
class PolicyVersionAdmin(OrgScopedAdmin[PolicyVersion]):
    list_display = ["policy_id", "org", "rule_count", "is_active", "created_at"]
    list_filter = [OrgFilter]
    search_fields = ["policy_id", "policy_hash"]
    actions = ["roll_back_to_selected"]
    change_list_template = "admin/policy/policyversion/change_list.html"
    change_form_template = "admin/policy/policyversion/change_form.html"

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
        deployed = policy_deploy(
            org=obj.org,
            toml=form.cleaned_data["toml"],
            actor=Actor.console(request.user),
        )
        version = deployed.version
        for field in ("pk", "policy_id", "policy_hash", "rule_count", "created_at"):
            setattr(obj, field, getattr(version, field))
        _tell(request, deployed, obj.org)

    def breadcrumb(self, obj: PolicyVersion) -> str:
        rules = f"{obj.rule_count} rule{'s' if obj.rule_count != 1 else ''}"
        return f"Version of {obj.created_at:%Y-%m-%d %H:%M} ({rules})"

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
        return toml_diff(old, obj.toml, name, obj.policy_id)

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

    def _roll_back(self, request: HttpRequest, version: PolicyVersion) -> bool:
        """Re-deploy ``version``'s TOML through policy_deploy, as a console deploy."""
        if not can_write(request, version.org_id):
            messages.error(request, f"{version.policy_id}: rolling back needs the manager role")
            return False
        deployed = policy_deploy(
            org=version.org,
            toml=version.toml,
            actor=Actor.console(request.user),
        )
        _tell(request, deployed, version.org)
        return True

    @admin.action(description="Roll back to the selected version (re-deploy it)")
    def roll_back_to_selected(
        self, request: HttpRequest, queryset: QuerySet[PolicyVersion]
    ) -> None:
        if len({version.org_id for version in queryset}) != queryset.count():
            messages.error(request, "Select one version per org: only one can be active.")
            return
        for version in queryset:
            self._roll_back(request, version)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("preview/", wrap(self.preview_view), name="policy_policyversion_preview"),
            path("preview/<str:replay_id>/", wrap(self.replay_view),
                 name="policy_policyversion_replay"),
            path("compare/", wrap(self.compare_view), name="policy_policyversion_compare"),
            path("<int:version_id>/rollback/", wrap(self.rollback_view),
                 name="policy_policyversion_rollback"),
            *super().get_urls(),
        ]  # fmt: skip

    def _visible(self, request: HttpRequest, version_id: object) -> PolicyVersion:
        try:
            pk = int(str(version_id))
        except ValueError:
            raise Http404("no such policy version") from None
        version = self.get_queryset(request).filter(pk=pk).first()
        if version is None:
            raise Http404("no such policy version")
        return version

    def rollback_view(self, request: HttpRequest, version_id: int) -> HttpResponse:
        """The "Roll back to this version" button of a version's page (POST)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        version = self._visible(request, version_id)
        if not can_write(request, version.org_id):
            raise PermissionDenied
        self._roll_back(request, version)
        return HttpResponseRedirect(reverse("admin:policy_policyversion_change", args=[version.pk]))

    def compare_view(self, request: HttpRequest) -> HttpResponse:
        """The diff between two versions of one org (``?old=<id>&new=<id>``)."""
        old = self._visible(request, request.GET.get("old"))
        new = self._visible(request, request.GET.get("new"))
        if old.org_id != new.org_id:
            raise Http404("the two versions belong to different orgs")
        context = {
            **self.admin_site.each_context(request),
            "title": f"{old.policy_id} → {new.policy_id} ({old.org.slug})",
            "opts": self.model._meta,
            "old": old,
            "new": new,
            "diff": toml_diff(old.toml, new.toml, old.policy_id, new.policy_id),
            "versions": PolicyVersion.objects.filter(org_id=old.org_id).order_by("-created_at"),
        }
        return TemplateResponse(request, "admin/policy/policyversion/compare.html", context)

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any,
                           **kwargs: Any) -> Any:  # fmt: skip
        """A refused deploy shows its error at the top of the form, with the line."""
        form = context["adminform"].form
        if "toml" in form.fields:
            context["policy_error"] = policy_error_at(form, form.data.get("toml", ""))
        return super().render_change_form(request, context, *args, **kwargs)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        version = self.get_queryset(request).filter(pk=object_id).first()
        extra = {
            **(extra_context or {}),
            "can_roll_back": version is not None and can_write(request, version.org_id),
            "original_is_active": version is not None and self.is_active(version),
            "other_versions": (
                PolicyVersion.objects.filter(org_id=version.org_id).exclude(pk=version.pk)
                .order_by("-created_at") if version else []
            ),
        }  # fmt: skip
        return super().change_view(request, object_id, form_url, extra)

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """Replay a window of verified receipts through a draft and the active policy;
        nothing is deployed (manager+, as POST /v1/policy/preview). A small window's report
        is shown at once; a larger one is replayed by the worker, on the replay's own page,
        which polls until it is ready."""
        if not can_write(request, None):
            raise PermissionDenied
        form = PolicyPreviewForm(request.POST or None)
        form.fields["org"].queryset = writable_orgs(request)  # type: ignore[attr-defined]
        replay = None
        if request.method == "POST" and form.is_valid():
            replay = policy_replay_request(
                org=form.cleaned_data["org"],
                toml=form.cleaned_data["toml"],
                days=form.cleaned_data["days"],
                requested_by=request.user if isinstance(request.user, User) else None,
            )
            if replay.status != ReplayStatus.READY:
                return HttpResponseRedirect(
                    reverse("admin:policy_policyversion_replay", args=[replay.replay_id])
                )
        error = policy_error_at(form, request.POST.get("toml", "")) if form.is_bound else None
        return self._preview_page(request, form, replay, error)

    def replay_view(self, request: HttpRequest, replay_id: str) -> HttpResponse:
        """One replay: its report once ready; until then the page reloads itself."""
        replay = (
            PolicyReplay.objects.filter(replay_id=replay_id, org__in=writable_orgs(request))
            .select_related("org")
            .first()
        )
        if replay is None:
            raise Http404("no such policy replay")
        form = PolicyPreviewForm(initial={"org": replay.org_id, "toml": replay.proposed_toml,
                                          "days": replay.days})  # fmt: skip
        form.fields["org"].queryset = writable_orgs(request)  # type: ignore[attr-defined]
        return self._preview_page(request, form, replay, None)

    def _preview_page(
        self,
        request: HttpRequest,
        form: PolicyPreviewForm,
        replay: PolicyReplay | None,
        error: dict[str, Any] | None,
    ) -> TemplateResponse:
        report = policy_replay_report(replay) if replay is not None else None
        counted = report.transitions.most_common() if report else []
        transitions = [(change.replace(" -> ", " → "), count) for change, count in counted]
        context = {**self.admin_site.each_context(request), "title": "Preview a policy",
                   "form": form, "replay": replay, "report": report,
                   "waiting": replay is not None and report is None
                   and replay.status != ReplayStatus.FAILED,
                   "opts": self.model._meta, "policy_error": error,
                   "transitions": transitions}  # fmt: skip
        return TemplateResponse(request, "admin/policy/policyversion/preview.html", context)


@admin.register(PolicyDeployment)
class PolicyDeploymentAdmin(OrgScopedAdmin[PolicyDeployment]):
    """The deploy history, read-only."""

    list_display = ["deployed_at", "org", "version", "previous_version", "deployed_by", "channel"]
    list_filter = [OrgFilter, "channel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: PolicyDeployment | None = None
    ) -> bool:
        return False


class BreakGlassForm(forms.Form):
    reason = forms.CharField(
        widget=UnfoldAdminTextareaWidget(attrs={"rows": 3, "cols": 80}),
        max_length=2000,
        label="Why the quorum cannot wait (recorded, and sent as policy.break_glass)",
    )


@admin.register(PolicyProposal)
class PolicyProposalAdmin(OrgScopedAdmin[PolicyProposal]):
    """Co-signed changes: their state, votes and diff; an owner's break-glass."""

    list_display = ["created_at", "org", "version", "status", "votes_shown", "proposed_by_name",
                    "signing_page"]  # fmt: skip
    list_filter = [OrgFilter, "status"]
    change_form_template = "admin/policy/policyproposal/change_form.html"
    fields = ("org", "version", "previous_version", "status", "votes_shown", "roster",
              "proposed_by_name", "proposed_via", "created_at", "resolved_at",
              "break_glass_reason", "break_glass_at", "ratified_at", "diff_shown",
              "replay_shown", "signing_page")  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: PolicyProposal | None = None
    ) -> bool:
        return False

    @admin.display(description="Approvals")
    def votes_shown(self, obj: PolicyProposal) -> str:
        return f"{obj.approved_count} / {obj.quorum}"

    @admin.display(description="Diff")
    def diff_shown(self, obj: PolicyProposal) -> str:
        return format_html('<pre class="policy-diff">{}</pre>', obj.diff or "(identical)")

    @admin.display(description="Replay over recent receipts")
    def replay_shown(self, obj: PolicyProposal) -> str:
        replay_id = (obj.replay or {}).get("replay_id")
        if not replay_id:
            return "-"
        url = reverse("admin:policy_policyversion_replay", args=[replay_id])
        days = (obj.replay or {}).get("days", "")
        return format_html('<a href="{}">what it changes over {} days of receipts</a>', url, days)

    @admin.display(description="Signing page")
    def signing_page(self, obj: PolicyProposal) -> str:
        if not obj.takes_votes:
            return "-"
        url = reverse("console-policy-proposal", args=[obj.version.policy_id])
        return format_html('<a href="{}">sign</a>', url)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:proposal_id>/break-glass/", wrap(self.break_glass_view),
                 name="policy_policyproposal_break_glass"),
            *super().get_urls(),
        ]  # fmt: skip

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        proposal = self.get_queryset(request).filter(pk=object_id).first()
        can_break_glass = (
            proposal is not None
            and proposal.status == ProposalStatus.OPEN
            and can_write(request, proposal.org_id, Role.OWNER)
        )
        extra = {**(extra_context or {}), "can_break_glass": can_break_glass,
                 "break_glass_form": BreakGlassForm()}  # fmt: skip
        return super().change_view(request, object_id, form_url, extra)

    def break_glass_view(self, request: HttpRequest, proposal_id: int) -> HttpResponse:
        """Activate an open proposal now, without the quorum (owner, POST, a reason)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        proposal = self.get_queryset(request).filter(pk=proposal_id).first()
        if proposal is None:
            raise Http404("no such proposal")
        if not can_write(request, proposal.org_id, Role.OWNER):
            raise PermissionDenied
        back = HttpResponseRedirect(
            reverse("admin:policy_policyproposal_change", args=[proposal.pk])
        )
        form = BreakGlassForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Break-glass needs a written reason.")
            return back
        previous = proposal.previous_version
        try:
            policy_deploy(
                org=proposal.org,
                toml=proposal.version.toml,
                expected_policy_hash=previous.policy_hash if previous else EMPTY_POLICY_HASH,
                actor=Actor.console(request.user),
                break_glass_reason=form.cleaned_data["reason"],
            )
        except DomainError as error:
            messages.error(request, f"Refused: {error.message}")
            return back
        messages.warning(
            request,
            f"{proposal.version.policy_id} is active without the quorum (break-glass); it "
            "shows on the dashboard until the quorum approves it or it is replaced.",
        )
        return back
