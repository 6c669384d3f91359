"""Encrypts the webhook signing secrets stored in clear (apps.common.encryption), in
batches; reversed, decrypts them back (the previous migration's reverse narrows the columns
again). Rows already encrypted are left as they are, so it may run after new rows were
written encrypted by the new code."""

from django.db import migrations

from apps.common.encryption import decrypt, encrypt_if_clear, rewrite_stored

FIELDS = ("secret", "previous_secret")
BATCH = 500


def encrypt_secrets(apps, schema_editor):
    model = apps.get_model("events", "WebhookEndpoint")
    rewrite_stored(model, FIELDS, encrypt_if_clear, batch_size=BATCH)


def decrypt_secrets(apps, schema_editor):
    model = apps.get_model("events", "WebhookEndpoint")
    rewrite_stored(model, FIELDS, decrypt, batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [("events", "0013_secret_columns_for_tokens")]

    operations = [migrations.RunPython(encrypt_secrets, decrypt_secrets)]
