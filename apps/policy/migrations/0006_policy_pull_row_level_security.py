from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("policy", "0005_policy_pull_and_stale_check")]

    operations = [org_rls("policy_policypull")]
