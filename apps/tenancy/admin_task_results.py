"""The background task results list (django-tasks' database backend; superusers only),
paged like the org lists (apps.tenancy.admin_paging): newest first by (enqueued_at, id),
through the index common migration 0002 adds to the package's table, with no count. The
status and queue filters look through a window of the newest results, and the queue
filter offers the configured queues (the stock one would read every row for its values).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.admin import SimpleListFilter
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.tenancy.admin_paging import KeysetAdmin


class TaskQueueFilter(SimpleListFilter):
    title = "queue"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        queues = {name for backend in settings.TASKS.values() for name in backend.get("QUEUES", [])}
        return [(name, name) for name in sorted(queues)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(queue_name=value) if value else queryset


class TaskResultList(KeysetAdmin):
    """Mixed before the package's own admin class (apps.tenancy.admin_site)."""

    one_org_at_a_time = False
    keyset = ("-enqueued_at", "-id")
    list_filter: Any = ("status", TaskQueueFilter)
    list_per_page = 50
