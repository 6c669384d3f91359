"""Console: the admin log, where every console action is recorded. Nobody edits it: the
console grants no add, change or delete on it (superusers included), and on PostgreSQL a
trigger refuses UPDATE and DELETE (migration 0001 of this app)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.forms import AdminPasswordChangeForm, UserChangeForm, UserCreationForm


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
