from django.db import migrations

from apps.common.rls import org_rls


class Migration(migrations.Migration):
    dependencies = [("events", "0001_initial"), ("tenancy", "0004_row_level_security")]

    operations = [
        org_rls("events_webhookendpoint"),
        org_rls("events_event"),
        org_rls("events_delivery"),
        org_rls("events_emailsubscription"),
        org_rls("events_evidenceexportjob"),
    ]
