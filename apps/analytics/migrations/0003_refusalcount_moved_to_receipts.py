# RefusalCount now lives in receipts (receipts 0006 renames its table); analytics only reads.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("analytics", "0002_row_level_security"),
        ("receipts", "0006_refusalcount"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="RefusalCount")],
        ),
    ]
