"""Single sign-on client secrets become an encrypted field (apps.common.encryption): the
column widens to hold a Fernet token of a 255-character secret. The values are encrypted
by the next migration."""

import apps.common.encryption
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tenancy', '0021_org_policy_quorum'),
    ]

    operations = [
        migrations.AlterField(
            model_name='ssoconfig',
            name='client_secret',
            field=apps.common.encryption.EncryptedCharField(max_length=255),
        ),
    ]
