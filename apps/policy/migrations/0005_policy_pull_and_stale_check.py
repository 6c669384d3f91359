"""The fleet (issue 32): each API key's latest policy pull, and the once-per-deployment
check for agents still enforcing a replaced version.

Deployments made before this migration count as checked: no pull was recorded before it,
so there is nothing to find, and the first check does not walk the whole history.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('policy', '0004_policy_proposals_row_level_security'),
        ('tenancy', '0016_audit_kind_legal_hold'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='PolicyPull',
            fields=[
                ('api_key', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='tenancy.apikey')),
                ('user_agent', models.CharField(blank=True, default='', max_length=300)),
                ('policy_hash', models.CharField(max_length=64)),
                ('served_since', models.DateTimeField()),
                ('pulled_at', models.DateTimeField()),
            ],
        ),
        migrations.AddField(
            model_name='policydeployment',
            name='stale_agents_checked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(
            sql="UPDATE policy_policydeployment SET stale_agents_checked_at = deployed_at",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.AddIndex(
            model_name='policydeployment',
            index=models.Index(condition=models.Q(('stale_agents_checked_at__isnull', True)), fields=['deployed_at'], name='policy_deploy_unchecked'),
        ),
        migrations.AddField(
            model_name='policypull',
            name='org',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenancy.org'),
        ),
        migrations.AddIndex(
            model_name='policypull',
            index=models.Index(fields=['org', 'policy_hash'], name='policy_pull_org_hash'),
        ),
    ]
