"""Console: the admin log, where every console action is recorded (nobody edits it: the
console grants no add, change or delete on it, superusers included, and on PostgreSQL a
trigger refuses UPDATE and DELETE, migration 0001 of this app); background evidence
exports (auditor+), built by a worker, downloaded once ready; and legal holds (auditor+
see them, owners set and release them)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import FileResponse, HttpRequest
from django.urls import path, reverse
from django.utils.html import format_html
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.forms import AdminPasswordChangeForm, UserChangeForm, UserCreationForm

from apps.audit.evidence import EvidenceWindow
from apps.audit.exports import evidence_export_request, export_file_response
from apps.audit.holds import legal_hold_release, legal_hold_set
from apps.audit.models import EvidenceExportJob, ExportStatus, LegalHold, ReceiptArchive
from apps.audit.selectors import receipt_archive_of
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import is_retired
from apps.tenancy.admin_access import (
    OrgFilter,
    OrgScopedAdmin,
    can_write,
    member_roles,
    writable_orgs,
)
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role
from apps.transparency.admin import TransparentMirrorEntryAdmin


@admin.register(LogEntry)
class ConsoleLogAdmin(UnfoldModelAdmin, admin.ModelAdmin[LogEntry]):
    list_display = ["action_time", "user", "content_type", "object_repr", "action_shown",
                    "change_shown"]  # fmt: skip
    list_filter = ["action_flag", "content_type"]
    search_fields = ["object_repr", "change_message", "user__username"]
    fields = ("action_time", "user", "content_type", "object_id", "object_repr", "action_shown",
              "change_shown")  # fmt: skip
    readonly_fields = fields
    date_hierarchy = "action_time"

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    @admin.display(description="Action", ordering="action_flag")
    def action_shown(self, obj: LogEntry) -> str:
        return {ADDITION: "added", CHANGE: "changed", DELETION: "deleted"}.get(
            obj.action_flag, str(obj.action_flag)
        )

    @admin.display(description="Change")
    def change_shown(self, obj: LogEntry) -> str:
        """The change in words (Django's own rendering), not its stored JSON."""
        return obj.get_change_message() or "-"

    def has_view_permission(self, request: HttpRequest, obj: LogEntry | None = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def get_queryset(self, request: HttpRequest) -> QuerySet[LogEntry]:
        queryset = super().get_queryset(request)
        # Staff who are not superusers see their own actions; superusers see everyone's.
        if request.user.is_superuser:
            return queryset
        return queryset.filter(user_id=request.user.pk or 0)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: LogEntry | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: LogEntry | None = None) -> bool:
        return False


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class ConsoleUserAdmin(UserAdmin, UnfoldModelAdmin):  # type: ignore[type-arg]
    """Users are deactivated, never deleted: deleting one would take their admin log
    entries with it (the log's user column cascades)."""

    form = UserChangeForm
    add_form = UserCreationForm
    change_password_form = AdminPasswordChangeForm

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class ExportRequestForm(forms.ModelForm[EvidenceExportJob]):
    class Meta:
        model = EvidenceExportJob
        fields = ["org", "window_from", "window_to"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("window_from"), data.get("window_to")
        if start and end and start > end:
            raise forms.ValidationError("from must not be after to")
        return data


@admin.register(EvidenceExportJob)
class EvidenceExportJobAdmin(OrgScopedAdmin[EvidenceExportJob]):
    """Request an evidence export (auditor+): it is built in the background; this list
    shows its state and, once ready, the download."""

    form = ExportRequestForm
    write_role = Role.AUDITOR
    list_display = ["export_id", "org", "status", "window_from", "window_to", "size",
                    "download", "created_at", "finished_at"]  # fmt: skip
    list_filter = [OrgFilter, "status"]

    def get_fields(
        self, request: HttpRequest, obj: EvidenceExportJob | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ("org", "window_from", "window_to")
        return ("org", "export_id", "status", "window_from", "window_to", "size", "sha256",
                "error", "download", "created_at", "finished_at")  # fmt: skip

    def get_readonly_fields(
        self, request: HttpRequest, obj: EvidenceExportJob | None = None
    ) -> tuple[str, ...]:
        return () if obj is None else self.get_fields(request, obj)

    def has_change_permission(
        self, request: HttpRequest, obj: EvidenceExportJob | None = None
    ) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "org":
            kwargs["queryset"] = writable_orgs(request, Role.AUDITOR)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(
        self, request: HttpRequest, obj: EvidenceExportJob, form: Any, change: bool
    ) -> None:
        data = form.cleaned_data
        job = evidence_export_request(
            org=data["org"],
            window=EvidenceWindow(data.get("window_from"), data.get("window_to")),
            requested_by=request.user,  # type: ignore[arg-type]
        )
        obj.pk = job.pk
        obj.export_id = job.export_id
        self.message_user(
            request, f"Export {job.export_id} queued: this page shows when it is ready."
        )

    @admin.display(description="Download")
    def download(self, obj: EvidenceExportJob) -> str:
        if obj.status != ExportStatus.READY:
            return "-"
        url = reverse("admin:audit_evidenceexportjob_download", args=[obj.pk])
        return format_html('<a href="{}">download</a>', url)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("<int:job_id>/download/", wrap(self.download_view),
                 name="audit_evidenceexportjob_download"),
            *super().get_urls(),
        ]  # fmt: skip

    def download_view(self, request: HttpRequest, job_id: int) -> FileResponse:
        job = self.get_queryset(request).filter(pk=job_id).first()
        if job is None or job.status != ExportStatus.READY:
            raise PermissionDenied
        if not can_write(request, job.org_id, Role.AUDITOR):
            raise PermissionDenied
        return export_file_response(job)


admin.site.unregister(MirrorEntry)


@admin.register(MirrorEntry)
class ArchivedMirrorEntryAdmin(TransparentMirrorEntryAdmin):
    """The receipts page, with where a retired receipt's body is archived."""

    # One field more than the transparency app's page (which cannot know the archive).
    fields = ("archive", *TransparentMirrorEntryAdmin.fields)  # type: ignore[assignment]
    readonly_fields = fields  # type: ignore[assignment]

    @admin.display(description="Archive")
    def archive(self, obj: MirrorEntry) -> str:
        archive = receipt_archive_of(org=obj.org, seq=obj.seq)
        if not is_retired(obj):
            if archive is None:
                return "in the mirror (not archived)"
            return f"in the mirror, and archived ({archive.month:%Y-%m}, {archive.state})"
        if archive is None:
            return "the body is gone, and no archive holds it: run verify_chain"
        return (
            f"The body is archived: past the org's retention, the receipts of "
            f"{archive.month:%Y-%m} (#{archive.first_seq}-{archive.last_seq}) were written to "
            f"{archive.location} (SHA-256 {archive.sha256}), verified there, and retired from "
            "the mirror. An evidence export of this range is served from that archive."
        )


@admin.register(ReceiptArchive)
class ReceiptArchiveAdmin(OrgScopedAdmin[ReceiptArchive]):
    """The org-months archived past retention (read only: the retention worker writes them)."""

    list_display = ["org", "month", "first_seq", "last_seq", "receipts", "state", "location",
                    "locked_until", "retired_at"]  # fmt: skip
    list_filter = [OrgFilter, "state"]
    fields = ("org", "month", "first_seq", "last_seq", "receipts", "state", "storage_name",
              "storage_version", "location", "size", "sha256", "lock_mode", "locked_until",
              "created_at", "written_at", "verified_at", "retired_at")  # fmt: skip
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: ReceiptArchive | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: ReceiptArchive | None = None
    ) -> bool:
        return False


class LegalHoldSetForm(forms.ModelForm[LegalHold]):
    class Meta:
        model = LegalHold
        fields = ["org", "scope", "range_start", "range_end", "session_id", "reason"]
        labels = {"range_start": "From (UTC, inclusive)", "range_end": "To (UTC, inclusive)"}
        help_texts = {
            "scope": "The whole org takes nothing else; a date range from, to or both; a "
            "session its session id.",
        }


class LegalHoldReleaseForm(forms.ModelForm[LegalHold]):
    release_reason = forms.CharField(
        max_length=500, label="Release reason", help_text="Saving releases the hold, for good."
    )

    class Meta:
        model = LegalHold
        fields = ["release_reason"]


HOLD_DETAIL = ("hold_id", "org", "scope", "covers", "reason", "set_by_name", "set_at",
               "released_at", "released_by_name")  # fmt: skip


@admin.register(LegalHold)
class LegalHoldAdmin(OrgScopedAdmin[LegalHold]):
    """An org's legal holds: auditors and above see them (what is kept, and why); owners
    set one (add) and release one (its page, with the reason). Released holds stay listed,
    read-only; nothing deletes a hold."""

    write_role = Role.OWNER
    list_display = ["hold_id", "org", "covers", "status", "reason", "set_by_name", "set_at",
                    "released_at"]  # fmt: skip
    list_filter = [OrgFilter, "scope", ("released_at", admin.EmptyFieldListFilter)]
    search_fields = ["hold_id", "session_id", "reason"]

    def _readable_org_ids(self, request: HttpRequest) -> list[int]:
        return [org for org, role in member_roles(request).items() if role.at_least(Role.AUDITOR)]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LegalHold]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(org_id__in=self._readable_org_ids(request))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser or self._readable_org_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: LegalHold | None = None) -> bool:
        if request.user.is_superuser:
            return True
        readable = self._readable_org_ids(request)
        return bool(readable) if obj is None else obj.org_id in readable

    def has_change_permission(self, request: HttpRequest, obj: LegalHold | None = None) -> bool:
        # A released hold is a record: shown, never changed again.
        if obj is not None and not obj.is_active:
            return False
        return super().has_change_permission(request, obj)

    def get_form(
        self,
        request: HttpRequest,
        obj: LegalHold | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> Any:
        kwargs["form"] = LegalHoldSetForm if obj is None else LegalHoldReleaseForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: LegalHold | None = None) -> tuple[str, ...]:
        if obj is None:
            return tuple(LegalHoldSetForm.Meta.fields)
        if self.has_change_permission(request, obj):
            return (*HOLD_DETAIL, "release_reason")
        return (*HOLD_DETAIL, "release_reason") if not obj.is_active else HOLD_DETAIL

    def get_readonly_fields(
        self, request: HttpRequest, obj: LegalHold | None = None
    ) -> tuple[str, ...]:
        if obj is None:
            return ()
        if self.has_change_permission(request, obj):
            return HOLD_DETAIL
        return self.get_fields(request, obj)

    @admin.display(description="Covers")
    def covers(self, obj: LegalHold) -> str:
        return obj.covers

    @admin.display(description="Status", ordering="released_at")
    def status(self, obj: LegalHold) -> str:
        return "active" if obj.is_active else "released"

    def save_model(self, request: HttpRequest, obj: LegalHold, form: Any, change: bool) -> None:
        data = form.cleaned_data
        actor = Actor.console(request.user)
        if change:
            released = legal_hold_release(hold=obj, reason=data["release_reason"], actor=actor)
            obj.released_at = released.released_at
            self.message_user(request, f"Legal hold {obj.hold_id} released.")
            return
        hold = legal_hold_set(
            org=data["org"], scope=data["scope"], reason=data["reason"],
            range_start=data.get("range_start"), range_end=data.get("range_end"),
            session_id=data.get("session_id") or "", actor=actor,
        )  # fmt: skip
        obj.pk, obj.hold_id, obj.set_at = hold.pk, hold.hold_id, hold.set_at
