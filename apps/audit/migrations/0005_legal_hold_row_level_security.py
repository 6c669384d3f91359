from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("audit", "0004_legal_hold_and_export_retention")]

    operations = [org_rls("audit_legalhold")]
