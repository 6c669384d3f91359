# The refusal counter belongs to the mirror: the model moves from analytics to receipts, and
# its table is renamed (row-level security policies stay attached to the table).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("receipts", "0005_mirrorentry_claimed_trust_level"),
        ("analytics", "0002_row_level_security"),
        ("tenancy", "0004_row_level_security"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE analytics_refusalcount RENAME TO receipts_refusalcount",
                    "ALTER TABLE receipts_refusalcount RENAME TO analytics_refusalcount",
                ),
            ],
            state_operations=[
                migrations.CreateModel(
                    name="RefusalCount",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("day", models.DateField()),
                        ("kind", models.CharField(max_length=64)),
                        ("count", models.PositiveBigIntegerField(default=0)),
                        ("org", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="tenancy.org")),
                    ],
                    options={
                        "constraints": [models.UniqueConstraint(fields=("org", "day", "kind"), name="refusal_org_day_kind")],
                    },
                ),
            ],
        ),
    ]
