"""The console's "recently decided" approvals of an org, newest first, by an index of the
decided ones (a pending approval has no ``resolved_at``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0013_approval_policy_hash"),
        ("tenancy", "0016_audit_kind_legal_hold"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="approval",
            index=models.Index(
                condition=models.Q(("resolved_at__isnull", False)),
                fields=["org", "resolved_at", "id"],
                name="approval_org_resolved",
            ),
        ),
    ]
