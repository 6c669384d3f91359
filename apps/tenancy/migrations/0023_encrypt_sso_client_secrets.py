"""Encrypts the single sign-on client secrets stored in clear (apps.common.encryption), in
batches; reversed, decrypts them back (the previous migration's reverse narrows the column
again). Rows already encrypted are left as they are."""

from django.db import migrations

from apps.common.encryption import decrypt, encrypt_if_clear, rewrite_stored

FIELDS = ("client_secret",)
BATCH = 500


def encrypt_secrets(apps, schema_editor):
    model = apps.get_model("tenancy", "SsoConfig")
    rewrite_stored(model, FIELDS, encrypt_if_clear, batch_size=BATCH)


def decrypt_secrets(apps, schema_editor):
    model = apps.get_model("tenancy", "SsoConfig")
    rewrite_stored(model, FIELDS, decrypt, batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0022_sso_client_secret_column_for_tokens")]

    operations = [migrations.RunPython(encrypt_secrets, decrypt_secrets)]
