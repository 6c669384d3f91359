from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0012_org_session_token_version")]

    operations = [org_rls("tenancy_orgsessiontokenversion")]
