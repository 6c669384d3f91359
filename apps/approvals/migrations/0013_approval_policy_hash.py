"""The policy a suspension was decided under, on its approval (issue 32's fleet view).

Approvals opened before this migration get it from their stored suspended content
(``suspension.policy.policy_hash``, when it is 64 lowercase hex), as opening now stores it.
PostgreSQL only: the SQLite trial database keeps "" for them.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0012_approvalescalation_row_level_security'),
    ]

    operations = [
        migrations.AddField(
            model_name='approval',
            name='policy_hash',
            field=models.CharField(blank=True, db_default='', max_length=64),
        ),
        migrations.RunSQL(
            # The CASE keeps the cast off rows without content (SQL does not promise to
            # test the LIKE first).
            sql=(
                "UPDATE approvals_approval SET policy_hash = hashed.value FROM ("
                " SELECT id, CASE WHEN suspended_content LIKE '%\"suspension\"%'"
                " THEN suspended_content::jsonb #>> '{suspension,policy,policy_hash}'"
                " END AS value FROM approvals_approval"
                ") AS hashed "
                "WHERE hashed.id = approvals_approval.id AND hashed.value ~ '^[0-9a-f]{64}$'"
            ),
            reverse_sql=migrations.RunSQL.noop,
            hints={"vendor": "postgresql"},
        ),
    ]
