"""Console: the transparency log. The latest checkpoints with their witnesses' cosignatures
(public data), witness registration (superusers: the operators), each org's log id, and
each mirrored receipt's inclusion status on its page."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.widgets import UnfoldAdminTextInputWidget

from apps.receipts.admin import DETAIL_FIELDS, MirrorEntryAdmin
from apps.receipts.models import MirrorEntry
from apps.tenancy.admin_access import OrgScopedAdmin
from apps.transparency.errors import WitnessInvalid
from apps.transparency.models import Checkpoint, OrgLog, Witness
from apps.transparency.selectors import checkpoint_view, entry_inclusion_status
from apps.transparency.services import witness_register


class _ReadOnly(UnfoldModelAdmin):  # type: ignore[misc]
    """Public log data: every console user may read it; nobody edits it here."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Checkpoint)
class CheckpointAdmin(_ReadOnly):
    list_display = ["epoch", "size", "root_hex", "published_at", "witnessed_by"]
    ordering = ["-epoch"]
    list_per_page = 25
    fields = ["epoch", "size", "root_hex", "published_at", "witnessed_by", "note"]
    readonly_fields = fields

    @admin.display(description="root")
    def root_hex(self, obj: Checkpoint) -> str:
        return bytes(obj.root).hex()

    @admin.display(description="cosigned by")
    def witnessed_by(self, obj: Checkpoint) -> str:
        rows = checkpoint_view(obj).cosignatures
        if not rows:
            return "no witness yet"
        return format_html_join(", ", "{}", ((row.witness.name,) for row in rows))

    @admin.display(description="served checkpoint (note)")
    def note(self, obj: Checkpoint) -> str:
        return format_html("<pre>{}</pre>", checkpoint_view(obj).note)


class WitnessRegisterForm(forms.ModelForm[Witness]):
    key = forms.CharField(
        max_length=400,
        widget=UnfoldAdminTextInputWidget,
        help_text="b64 of the raw 32-byte Ed25519 public key, or the witness's vkey.",
    )

    class Meta:
        model = Witness
        fields = ["name"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self.registration = None
        name, key = cleaned.get("name"), cleaned.get("key")
        if name and key:
            try:
                self.registration = witness_register(name=name, key=key)
            except WitnessInvalid as error:
                raise forms.ValidationError(str(error)) from error
        return cleaned


@admin.register(Witness)
class WitnessAdmin(_ReadOnly):
    list_display = ["name", "key_id", "active", "registered_at", "deactivated_at"]
    list_filter = ["active"]
    fields = ["name", "key_id", "vkey", "active", "registered_at", "deactivated_at"]
    readonly_fields = fields
    actions = ["deactivate_selected"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def get_form(
        self, request: HttpRequest, obj: Witness | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is None:
            kwargs["form"] = WitnessRegisterForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Witness | None = None) -> Any:
        return ["name", "key"] if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Witness | None = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Witness, form: Any, change: bool) -> None:
        registration = form.registration  # registered by the form's clean (the service)
        obj.pk = registration.witness.pk
        messages.info(request, f"{registration.witness.vkey}: {registration.status}")

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        if not request.user.is_superuser:
            actions.pop("deactivate_selected", None)
        return actions

    @admin.action(description="Deactivate selected witness keys (accepted cosignatures stay)")
    def deactivate_selected(self, request: HttpRequest, queryset: QuerySet[Witness]) -> None:
        for witness in queryset:
            witness_register(name=witness.name, key=witness.vkey, deactivate=True)
            # A witness key is the whole service's, not one org's: no org audit trail holds
            # it, so the console's own log records who deactivated it.
            self.log_change(request, witness, "Deactivated")
        self.message_user(request, "Deactivated.", messages.SUCCESS)


@admin.register(OrgLog)
class OrgLogAdmin(OrgScopedAdmin[OrgLog]):
    list_display = ["org", "log_id", "tree_size", "published_size"]
    fields = ["org", "log_id", "tree_size", "published_size"]
    readonly_fields = ["org", "log_id", "tree_size", "published_size"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: OrgLog | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: OrgLog | None = None) -> bool:
        return False


admin.site.unregister(MirrorEntry)


@admin.register(MirrorEntry)
class TransparentMirrorEntryAdmin(MirrorEntryAdmin):
    """The receipts page, with whether the log covers each receipt yet."""

    # One field more than the receipts app's page (which cannot know the log: it is below).
    fields = (*DETAIL_FIELDS[:5], "inclusion", *DETAIL_FIELDS[5:])  # type: ignore[assignment]
    readonly_fields = fields  # type: ignore[assignment]

    @admin.display(description="transparency log")
    def inclusion(self, obj: MirrorEntry) -> str:
        status = entry_inclusion_status(org_pk=obj.org_id, seq=obj.seq)
        if not status.covered:
            return "not yet in a checkpoint (the next epoch publishes it)"
        return (
            f"included: org tree size {status.org_tree_size}, first published in epoch "
            f"{status.epoch}; its proof: GET /v1/receipts/{obj.action_hash}/proof"
        )
