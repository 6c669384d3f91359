"""Evidence export jobs, moved here from the events app: in Django's state only. The table
(``events_evidenceexportjob``), its index and its row-level security (events 0002) stay as
they are; events 0006 drops the model from the events app's state.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0001_admin_log_append_only"),
        ("events", "0005_task_worker"),
        ("tenancy", "0013_org_session_token_version_row_level_security"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EvidenceExportJob",
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
                        ("export_id", models.CharField(max_length=40, unique=True)),
                        ("window_from", models.DateField(blank=True, null=True)),
                        ("window_to", models.DateField(blank=True, null=True)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("running", "Running"),
                                    ("ready", "Ready"),
                                    ("failed", "Failed"),
                                ],
                                default="pending",
                                max_length=16,
                            ),
                        ),
                        ("file_name", models.CharField(blank=True, default="", max_length=300)),
                        ("size", models.PositiveBigIntegerField(blank=True, null=True)),
                        ("sha256", models.CharField(blank=True, default="", max_length=64)),
                        ("error", models.CharField(blank=True, default="", max_length=300)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "org",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="tenancy.org",
                            ),
                        ),
                        (
                            "requested_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "events_evidenceexportjob",
                        "ordering": ["-created_at"],
                        "indexes": [
                            models.Index(fields=["org", "-created_at"], name="events_export_org")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
