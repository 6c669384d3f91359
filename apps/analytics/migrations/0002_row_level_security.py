from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("analytics", "0001_initial"), ("tenancy", "0004_row_level_security")]

    operations = [org_rls("analytics_refusalcount")]
