"""Webhook signing secrets become encrypted fields (apps.common.encryption): their columns
widen to hold a Fernet token of a 100-character secret (PostgreSQL widens a varchar
without rewriting the table). The values are encrypted by the next migration."""

import apps.common.encryption
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('events', '0012_delivery_indexes_for_the_log'),
    ]

    operations = [
        migrations.AlterField(
            model_name='webhookendpoint',
            name='previous_secret',
            field=apps.common.encryption.EncryptedCharField(blank=True, default='', max_length=100),
        ),
        migrations.AlterField(
            model_name='webhookendpoint',
            name='secret',
            field=apps.common.encryption.EncryptedCharField(max_length=100),
        ),
    ]
