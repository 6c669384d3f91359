"""Readiness: can this process serve requests now? Database, cache and migrations.

Each check is cheap: one ``SELECT 1``, one cache set and get, and the migration plan,
which is computed only until it first comes out empty (migrations are never un-applied
under a running process, so the positive answer is kept for the life of the process).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Case, Count, DateTimeField, F, Min, Q, When
from django.utils import timezone
from django_tasks_db.models import DBTaskResult, get_date_max

from apps.common.capacity import TRANSIENT_DATABASE_ERRORS, log_database_unavailable

logger = logging.getLogger(__name__)

OK = "ok"
FAILED = "failed"
PENDING = "pending"
SKIPPED = "skipped"

_migrations_applied = False


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, str]

    @property
    def ready(self) -> bool:
        return all(state == OK for state in self.checks.values())

    @property
    def failed(self) -> list[str]:
        return [name for name, state in self.checks.items() if state != OK]


def _database() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return OK


def _cache() -> str:
    # A key of its own per probe: workers probing at once must not read each other's value.
    key, value = f"mirror:readyz:{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(key, value, timeout=10)
    return OK if cache.get(key) == value else FAILED


def _migrations() -> str:
    global _migrations_applied
    if _migrations_applied:
        return OK
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        logger.warning("readiness: %d migrations not applied yet", len(pending))
        return PENDING
    _migrations_applied = True
    return OK


def forget_migrations_state() -> None:
    """Drop the kept positive migrations answer (tests)."""
    global _migrations_applied
    _migrations_applied = False


def _run(name: str, check: Callable[[], str]) -> str:
    try:
        return check()
    except TRANSIENT_DATABASE_ERRORS as error:
        # Probed every few seconds through an outage: one line each, one traceback.
        log_database_unavailable(f"readiness check {name} failed", error)
        return FAILED
    except Exception:  # any failure means not ready; the probe itself must answer
        logger.warning("readiness check %s failed", name, exc_info=True)
        return FAILED


def task_queue() -> dict[str, float | int | None]:
    """The background queue (django-tasks' database backend): how many tasks are due now
    and how long the longest-waiting one has been due, in seconds (``None``: none due).
    Reported, never failed on: a web process stays ready while workers catch up."""
    due = DBTaskResult.objects.ready().aggregate(
        count=Count("id"),
        since=Min(
            Case(
                When(run_after=get_date_max(), then=F("enqueued_at")),
                default=F("run_after"),
                output_field=DateTimeField(),
            )
        ),
    )
    since = due["since"]
    age = max(0.0, (timezone.now() - since).total_seconds()) if since else None
    return {"ready": int(due["count"]), "oldest_ready_seconds": age}


def tasks_running() -> dict[str, int]:
    """Tasks marked running, and those running for longer than TASK_RUNNING_BOUND_SECONDS:
    stuck in a live worker, or left by a dead one and not handed on yet (the workers'
    reclaim does that within a lease, so a lasting count is worth an alert)."""
    bound = timezone.now() - timedelta(seconds=settings.TASK_RUNNING_BOUND_SECONDS)
    counts = DBTaskResult.objects.filter(status="RUNNING").aggregate(
        running=Count("id"), over_bound=Count("id", filter=Q(started_at__lt=bound))
    )
    return {"running": int(counts["running"]), "over_bound": int(counts["over_bound"])}


def readiness() -> Readiness:
    checks = {"database": _run("database", _database), "cache": _run("cache", _cache)}
    # Without a database the migration plan cannot be read.
    checks["migrations"] = _run("migrations", _migrations) if checks["database"] == OK else SKIPPED
    return Readiness(checks=checks)
