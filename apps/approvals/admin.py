"""Console: approver keys (register, revoke) and the approval queue (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.approvals.models import Approval, ApproverKey
from apps.approvals.services import (
    approval_roster,
    approver_key_register,
    approver_key_revoke,
    canonical_public_key,
)
from apps.common.errors import DomainError
from apps.tenancy.admin_access import OrgFilter, OrgScopedAdmin, can_write


class ApproverKeyRegisterForm(forms.ModelForm[ApproverKey]):
    key_id = forms.CharField(
        max_length=100, required=False, help_text="Empty: derived from the key."
    )

    class Meta:
        model = ApproverKey
        fields = ["org", "public_key", "key_id", "label"]
        help_texts = {"public_key": "The approver's Ed25519 public key, standard base64."}

    def clean_public_key(self) -> str:
        try:
            return canonical_public_key(self.cleaned_data.get("public_key") or "")
        except DomainError as error:
            raise forms.ValidationError(error.message) from None


@admin.register(ApproverKey)
class ApproverKeyAdmin(OrgScopedAdmin[ApproverKey]):
    list_display = [
        "key_id",
        "org",
        "label",
        "public_key",
        "created_via",
        "created_at",
        "revoked_at",
    ]
    list_filter = [OrgFilter, "revoked_at"]
    search_fields = ["key_id", "label", "public_key"]
    actions = ["revoke_selected"]

    def get_form(
        self, request: HttpRequest, obj: ApproverKey | None = None, change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[ApproverKey]]:  # fmt: skip
        if obj is None:
            kwargs["form"] = ApproverKeyRegisterForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(
        self, request: HttpRequest, obj: ApproverKey | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ()
        return ("org", "key_id", "label", "public_key", "created_by", "created_via",
                "created_at", "revoked_at")  # fmt: skip

    def has_change_permission(self, request: HttpRequest, obj: ApproverKey | None = None) -> bool:
        # A key is registered or revoked (the action), never edited.
        return False if obj is not None else super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ApproverKey, form: Any, change: bool) -> None:
        # A refusal (the key signs the org's receipts, or is taken) propagates: the admin's
        # transaction rolls back and the page shows it (OrgScopedAdmin.changeform_view).
        key = approver_key_register(
            org=obj.org,
            public_key=obj.public_key,
            key_id=form.cleaned_data.get("key_id") or None,
            label=obj.label,
            created_by=request.user,  # type: ignore[arg-type]
            via="console",
        ).key
        obj.pk, obj.key_id = key.pk, key.key_id

    @admin.action(description="Revoke selected approver keys (their counted votes stay)")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApproverKey]) -> None:
        revoked = 0
        for key in queryset:
            if not can_write(request, key.org_id):
                messages.error(request, f"{key.key_id}: needs the manager role in {key.org}")
                continue
            approver_key_revoke(
                org=key.org,
                key_id=key.key_id,
                user=request.user,  # type: ignore[arg-type]
                via="console",
            )
            self.log_change(request, key, "Revoked")
            revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)


@admin.register(Approval)
class ApprovalAdmin(OrgScopedAdmin[Approval]):
    """The approval queue: read-only here; votes are signed on the approvers' devices."""

    list_display = ["approval_id", "org", "status", "waiting_for", "threshold", "approved_count",
                    "rule_id", "workflow", "flag", "created_at", "expires_at",
                    "resolved_at"]  # fmt: skip
    list_filter = ["status", OrgFilter, "flag"]
    search_fields = ["approval_id", "action_hash", "ticket_hash", "rule_id", "workflow"]
    readonly_fields = ["approval_id", "org", "action_hash", "ticket_hash", "status",
                       "waiting_for", "threshold", "roster_shown", "rule_id", "workflow",
                       "account", "context", "approved_count", "expires_at", "on_timeout", "flag",
                       "routing_hint", "created_at", "resolved_at",
                       "votes_and_history"]  # fmt: skip
    exclude = ["suspended_content", "access_token_digest", "provisional", "roster",
               "roster_frozen_at"]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Approval | None = None) -> bool:
        return False

    @admin.display(description="Waiting for")
    def waiting_for(self, obj: Approval) -> str:
        """What a pending approval waits for: approver keys (none or too few registered and
        eligible yet), its suspended receipt (opened by the suspend ticket), or votes."""
        if obj.status != "pending":
            return "-"
        if not obj.suspended_content:
            return "the suspended receipt (opened by its hash; not pushed yet)"
        eligible = len(approval_roster(obj))
        if eligible < obj.threshold:
            return f"approver keys ({eligible} eligible, {obj.threshold} needed)"
        return f"votes ({obj.approved_count} of {obj.threshold})"

    @admin.display(description="Roster")
    def roster_shown(self, obj: Approval) -> str:
        roster = approval_roster(obj)
        state = (
            f"frozen at the first vote, {obj.roster_frozen_at:%Y-%m-%d %H:%M:%S}"
            if obj.roster_frozen_at
            else "not frozen yet: the eligible keys now; it freezes at the first vote"
        )
        return "\n".join([*roster, f"({state})"])

    @admin.display(description="Votes and history")
    def votes_and_history(self, obj: Approval) -> str:
        votes = [
            f"{vote.voted_at:%Y-%m-%d %H:%M:%S} {vote.approver_public_key} {vote.decision}"
            + (" with its co-signed leg" if vote.record else " (no leg yet)")
            + (" (key since revoked)" if vote.approver_key.revoked_at else "")
            + (f": {vote.reason}" if vote.reason else "")
            for vote in obj.votes.select_related("approver_key")
        ]
        events = [
            f"{event.at:%Y-%m-%d %H:%M:%S} {event.kind}"
            + (f" {_event_detail(event.detail)}" if event.detail else "")
            for event in obj.events.all()
        ]
        return "\n".join([*votes, *events]) or "-"


def _event_detail(detail: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in detail.items())
