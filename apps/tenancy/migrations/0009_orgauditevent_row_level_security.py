from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0008_orgauditevent")]

    operations = [org_rls("tenancy_orgauditevent")]
