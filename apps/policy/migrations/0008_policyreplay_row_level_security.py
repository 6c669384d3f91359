from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("policy", "0007_policyreplay")]

    operations = [org_rls("policy_policyreplay")]
