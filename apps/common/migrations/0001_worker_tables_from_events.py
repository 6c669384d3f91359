"""The task workers' leases and the scheduler's slots, moved here from the events app: in
Django's state only. The tables (``events_taskworker``, ``events_periodicslot``) stay as
events 0001 and 0005 made them; events 0006 drops the models from the events app's state.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("events", "0005_task_worker"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TaskWorker",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("worker_id", models.CharField(max_length=64, unique=True)),
                        ("hostname", models.CharField(blank=True, default="", max_length=255)),
                        ("pid", models.PositiveIntegerField(blank=True, null=True)),
                        ("queues", models.JSONField(default=list)),
                        ("running", models.JSONField(default=list)),
                        ("started_at", models.DateTimeField(auto_now_add=True)),
                        ("seen_at", models.DateTimeField()),
                    ],
                    options={
                        "db_table": "events_taskworker",
                        "ordering": ["worker_id"],
                    },
                ),
                migrations.CreateModel(
                    name="PeriodicSlot",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=64)),
                        ("slot", models.BigIntegerField()),
                        ("enqueued_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "events_periodicslot",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("name", "slot"), name="events_periodic_slot_once"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
