"""The console's task results list pages newest first by (enqueued_at, id) (issue 30): the
third-party table (django-tasks' database backend) gets that index here, from our own
migrations, since its package has none that serves the list.

Not atomic: on PostgreSQL the index is built CONCURRENTLY, so the workers go on claiming
and finishing tasks while it builds; a plain CREATE INDEX elsewhere.
"""

from django.db import migrations

TABLE = "django_tasks_database_dbtaskresult"
INDEX = "task_result_enqueued"


def _concurrently(schema_editor) -> str:
    return "CONCURRENTLY " if schema_editor.connection.vendor == "postgresql" else ""


def create_index(apps, schema_editor):
    schema_editor.execute(
        f"CREATE INDEX {_concurrently(schema_editor)}IF NOT EXISTS {INDEX} "
        f"ON {TABLE} (enqueued_at, id)"
    )


def drop_index(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX {_concurrently(schema_editor)}IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("common", "0001_worker_tables_from_events"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(create_index, drop_index, atomic=False)]
