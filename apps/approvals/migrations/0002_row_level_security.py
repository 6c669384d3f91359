from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("approvals", "0001_initial"), ("tenancy", "0004_row_level_security")]

    operations = [
        org_rls("approvals_approverkey"),
        org_rls("approvals_approval"),
        org_rls("approvals_approvalvote"),
        org_rls("approvals_approvalevent"),
    ]
