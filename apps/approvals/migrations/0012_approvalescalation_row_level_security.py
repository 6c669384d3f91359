from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("approvals", "0011_approver_key_members_and_escalation")]

    operations = [org_rls("approvals_approvalescalation")]
