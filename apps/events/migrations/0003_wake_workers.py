"""Wake the workers when a task is enqueued (PostgreSQL): a trigger on the task engine's
queue table NOTIFYs ``countersign_tasks`` for every task due now (not for a deferred
one). Delivered at commit; nothing for a rolled-back enqueue. See apps.events.tasks."""

from django.db import migrations

CREATE = [
    """
    CREATE OR REPLACE FUNCTION countersign_wake_workers() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('countersign_tasks', '');
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER countersign_wake_workers
    AFTER INSERT ON django_tasks_database_dbtaskresult
    FOR EACH ROW
    WHEN (NEW.status = 'READY' AND (NEW.run_after >= '9999-01-01' OR NEW.run_after <= now()))
    EXECUTE FUNCTION countersign_wake_workers()
    """,
]
DROP = [
    "DROP TRIGGER IF EXISTS countersign_wake_workers ON django_tasks_database_dbtaskresult",
    "DROP FUNCTION IF EXISTS countersign_wake_workers()",
]


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0002_row_level_security"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunSQL(sql=CREATE, reverse_sql=DROP, hints={"vendor": "postgresql"})]
