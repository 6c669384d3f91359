"""The worker's tables went to the common app and evidence export jobs to the audit app
(common 0001, audit 0002): this drops them from the events app's state, with no change to
the tables, and carries along what names them by their old place:

- the content types (so permissions granted on them, and admin log entries, follow);
- the queue's rows: django-tasks stores each task's dotted path, and the tasks moved
  (each app now declares its own); a row naming an old path is rewritten to the new one,
  whatever its state (a queued one runs as before, a finished one still reads back), and
  a task failed as ``WorkerLost`` names the class where it now lives. apps.events.tasks
  keeps the old paths importable for one release, for rows a process still running the
  previous release enqueues during the upgrade.
"""

from django.db import migrations

MOVED_MODELS = {
    "periodicslot": "common",
    "taskworker": "common",
    "evidenceexportjob": "audit",
}

# Old dotted path -> new one.
MOVED_TASKS = {
    "apps.events.tasks.fan_out_event": "apps.events.services.fan_out_event",
    "apps.events.tasks.deliver_webhook": "apps.events.delivery.deliver_webhook",
    "apps.events.tasks.send_event_emails": "apps.events.emails.send_event_emails",
    "apps.events.tasks.send_endpoint_disabled_email": (
        "apps.events.emails.send_endpoint_disabled_email"
    ),
    "apps.events.tasks.sweep_approvals": "apps.approvals.tasks.sweep_approvals",
    "apps.events.tasks.publish_transparency_epoch": (
        "apps.transparency.tasks.publish_transparency_epoch"
    ),
    "apps.events.tasks.fold_receipt_rollups": "apps.analytics.tasks.fold_receipt_rollups",
    "apps.events.tasks.prune_task_results": "apps.common.workers.prune_task_results",
    "apps.events.tasks.reclaim_tasks": "apps.common.workers.reclaim_tasks",
    "apps.events.tasks.build_evidence_export": "apps.audit.exports.build_evidence_export",
}
MOVED_EXCEPTIONS = {"apps.events.workers.WorkerLost": "apps.common.workers.WorkerLost"}


def _rewrite(apps, schema_editor, *, forward: bool) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model, app in MOVED_MODELS.items():
        old, new = ("events", app) if forward else (app, "events")
        # Should the new app have one already, both stay (the old one is then stale, for
        # remove_stale_contenttypes): deleting either would reach the append-only admin log.
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)

    result = apps.get_model("django_tasks_database", "DBTaskResult")
    for old, new in MOVED_TASKS.items():
        before, after = (old, new) if forward else (new, old)
        result.objects.filter(task_path=before).update(task_path=after)
    for old, new in MOVED_EXCEPTIONS.items():
        before, after = (old, new) if forward else (new, old)
        result.objects.filter(exception_class_path=before).update(exception_class_path=after)


def forwards(apps, schema_editor) -> None:
    _rewrite(apps, schema_editor, forward=True)


def backwards(apps, schema_editor) -> None:
    _rewrite(apps, schema_editor, forward=False)


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0005_task_worker"),
        ("common", "0001_worker_tables_from_events"),
        ("audit", "0002_evidence_export_job_from_events"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="evidenceexportjob", name="org"),
                migrations.RemoveField(model_name="evidenceexportjob", name="requested_by"),
                migrations.DeleteModel(name="PeriodicSlot"),
                migrations.DeleteModel(name="TaskWorker"),
                migrations.DeleteModel(name="EvidenceExportJob"),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
