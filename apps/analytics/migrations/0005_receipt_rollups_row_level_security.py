from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("analytics", "0004_receipt_rollups")]

    operations = [org_rls("analytics_dailyrollup"), org_rls("analytics_rollupcursor")]
