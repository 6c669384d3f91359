from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("receipts", "0003_fewer_indexes"), ("tenancy", "0004_row_level_security")]

    operations = [
        org_rls("receipts_mirrorhead"),
        org_rls("receipts_mirrorentry"),
    ]
