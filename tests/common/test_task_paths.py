"""Tasks that moved to the app owning their work keep running across the upgrade: the
queue stores each task's dotted path, so rows written before it name the old one."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps as installed_apps
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.utils.module_loading import import_string
from django_tasks.base import Task
from django_tasks_db.models import DBTaskResult

from apps.approvals.tasks import sweep_approvals
from apps.audit.evidence import EvidenceWindow
from apps.audit.exports import evidence_export_request
from apps.audit.models import EvidenceExportJob
from apps.common.tasks import enqueue
from apps.common.workers import tasks_reclaim
from apps.events.delivery import deliver_webhook
from apps.events.tasks import sweep_deliveries
from tests.events.conftest import work

MIGRATION = import_module("apps.events.migrations.0006_worker_and_exports_moved_out")


@pytest.mark.parametrize(("old", "new"), sorted(MIGRATION.MOVED_TASKS.items()))
def test_a_moved_task_is_still_importable_at_its_old_path(old, new) -> None:
    task = import_string(old)
    assert isinstance(task, Task)
    assert task.module_path == new
    assert import_string(new) is task


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_under_its_old_path_runs() -> None:
    enqueue(sweep_approvals)
    DBTaskResult.objects.update(task_path="apps.events.tasks.sweep_approvals")

    work(lambda: DBTaskResult.objects.filter(finished_at__isnull=False).exists())

    row = DBTaskResult.objects.get()
    assert (row.status, row.return_value) == ("SUCCESSFUL", 0)


def test_an_export_whose_build_is_queued_under_the_old_path_is_not_failed(cast) -> None:
    job = evidence_export_request(org=cast.acme, window=EvidenceWindow(None, None))
    DBTaskResult.objects.update(task_path="apps.events.tasks.build_evidence_export")

    tasks_reclaim()

    assert EvidenceExportJob.objects.get(pk=job.pk).status == "pending"


def test_the_upgrade_rewrites_the_old_paths_and_moves_the_content_types(db) -> None:
    enqueue(sweep_approvals)
    enqueue(deliver_webhook, 1)
    enqueue(sweep_deliveries)  # did not move
    sweep, deliver, sweep_d = DBTaskResult.objects.order_by("enqueued_at", "id")
    DBTaskResult.objects.filter(pk=sweep.pk).update(task_path="apps.events.tasks.sweep_approvals")
    DBTaskResult.objects.filter(pk=deliver.pk).update(
        task_path="apps.events.tasks.deliver_webhook",
        status="FAILED",
        exception_class_path="apps.events.workers.WorkerLost",
    )
    # The content type as the previous release left it, with a permission granted on it.
    ContentType.objects.filter(app_label="audit", model="evidenceexportjob").delete()
    old_type = ContentType.objects.create(app_label="events", model="evidenceexportjob")
    permission = Permission.objects.create(
        content_type=old_type, codename="view_evidenceexportjob", name="Can view"
    )

    MIGRATION.forwards(installed_apps, None)

    paths = dict(DBTaskResult.objects.values_list("id", "task_path"))
    assert paths == {
        sweep.id: "apps.approvals.tasks.sweep_approvals",
        deliver.id: "apps.events.delivery.deliver_webhook",
        sweep_d.id: "apps.events.tasks.sweep_deliveries",
    }
    failed = DBTaskResult.objects.get(pk=deliver.pk)
    assert failed.exception_class_path == "apps.common.workers.WorkerLost"
    assert failed.task_result.errors[-1].exception_class.__name__ == "WorkerLost"
    ContentType.objects.clear_cache()
    permission.refresh_from_db()
    assert (permission.content_type.app_label, permission.content_type.model) == (
        "audit",
        "evidenceexportjob",
    )

    MIGRATION.backwards(installed_apps, None)

    assert DBTaskResult.objects.get(pk=sweep.pk).task_path == "apps.events.tasks.sweep_approvals"
    permission.refresh_from_db()
    assert permission.content_type.app_label == "events"
