from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("policy", "0003_policy_proposals")]

    operations = [
        org_rls("policy_policyproposal"),
        org_rls("policy_policyproposalvote"),
    ]
