"""Console: the admin log, where every console change is recorded. Nobody edits it here."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.db.models import QuerySet
from django.http import HttpRequest


@admin.register(LogEntry)
class ConsoleLogAdmin(admin.ModelAdmin[LogEntry]):
    list_display = ["action_time", "user", "content_type", "object_repr", "action_flag",
                    "change_message"]  # fmt: skip
    list_filter = ["action_flag", "content_type"]
    search_fields = ["object_repr", "change_message", "user__username"]
    date_hierarchy = "action_time"

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

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
