"""Secrets encrypted at rest (apps.common.encryption): what the database holds, reading it
back, key rotation with ``rotate_secrets_key``, the data migrations both ways, a value no
key decrypts, and the deploy check ``mirror.W002``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from apps.common import checks
from apps.common.encryption import (
    PREFIX,
    SecretUndecryptable,
    decrypt,
    encrypt,
    stored_length,
)
from apps.events.models import WebhookEndpoint
from apps.events.services import webhook_endpoint_create, webhook_endpoint_rotate_secret
from apps.tenancy.models import SsoConfig
from apps.tenancy.org_context import activate_all_orgs
from tests.receipts.test_lookup_columns_migration import _migrate

pytestmark = [pytest.mark.postgres]

OLD_KEY, NEW_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def raw(table: str, column: str, pk: int) -> str:
    """The column as the database holds it (what a dump would show)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])  # noqa: S608
        return str(cursor.fetchone()[0])


def endpoint(cast) -> WebhookEndpoint:
    return webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/x", event_types=["policy.deployed"]
    )


def sso(cast, secret: str = "the-client-secret") -> SsoConfig:  # noqa: S107 (a test value)
    return SsoConfig.objects.create(
        org=cast.acme, issuer="https://idp.example", client_id="c", client_secret=secret
    )


def rotate_command(*args: str) -> dict:
    out = StringIO()
    call_command("rotate_secrets_key", *args, stdout=out)
    return json.loads(out.getvalue())


class TestStored:
    def test_a_created_and_a_rotated_webhook_secret_are_never_in_the_column(self, cast):
        created = endpoint(cast)
        first = created.secret
        assert first.startswith("whsec_")
        stored = raw("events_webhookendpoint", "secret", created.pk)
        assert stored.startswith(PREFIX)
        assert first not in stored
        rotated = webhook_endpoint_rotate_secret(endpoint=created)
        for column, clear in (("secret", rotated.secret), ("previous_secret", first)):
            stored = raw("events_webhookendpoint", column, created.pk)
            assert stored.startswith(PREFIX)
            assert clear not in stored
        again = WebhookEndpoint.objects.get(pk=created.pk)
        assert (again.secret, again.previous_secret) == (rotated.secret, first)

    def test_an_sso_client_secret_is_encrypted_and_reads_back(self, cast):
        config = sso(cast)
        assert raw("tenancy_ssoconfig", "client_secret", config.pk).startswith(PREFIX)
        assert SsoConfig.objects.get(pk=config.pk).client_secret == "the-client-secret"

    def test_the_longest_client_secret_fits_its_column(self, cast):
        longest = "\U0001f511" * 255  # four bytes each in UTF-8
        config = sso(cast, longest)
        assert SsoConfig.objects.get(pk=config.pk).client_secret == longest
        assert len(raw("tenancy_ssoconfig", "client_secret", config.pk)) <= stored_length(255)

    def test_a_clear_legacy_value_still_reads_and_is_encrypted_when_saved(self, cast):
        config = sso(cast)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE tenancy_ssoconfig SET client_secret = 'legacy' WHERE id = %s", [config.pk]
            )
        loaded = SsoConfig.objects.get(pk=config.pk)
        assert loaded.client_secret == "legacy"
        loaded.save()
        assert raw("tenancy_ssoconfig", "client_secret", config.pk).startswith(PREFIX)
        assert SsoConfig.objects.get(pk=config.pk).client_secret == "legacy"

    def test_an_empty_previous_secret_stays_empty(self, cast):
        created = endpoint(cast)
        assert raw("events_webhookendpoint", "previous_secret", created.pk) == ""


class TestKeys:
    def test_the_derived_key_depends_on_secret_key(self, settings):
        settings.SECRETS_ENCRYPTION_KEYS = []
        stored = encrypt("s")
        settings.SECRET_KEY = "another-" + "k" * 50
        with pytest.raises(SecretUndecryptable, match="SECRETS_ENCRYPTION_KEYS"):
            decrypt(stored)

    def test_a_value_under_an_old_key_reads_after_rotation_and_the_command_reencrypts_it(
        self, cast, settings
    ):
        settings.SECRETS_ENCRYPTION_KEYS = [OLD_KEY]
        created = endpoint(cast)
        rotated = webhook_endpoint_rotate_secret(endpoint=created)  # both columns filled
        config = sso(cast)
        before = raw("events_webhookendpoint", "secret", created.pk)

        settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY, OLD_KEY]
        assert WebhookEndpoint.objects.get(pk=created.pk).secret == rotated.secret
        counts = rotate_command("--batch-size", "1")
        assert counts["events.webhookendpoint"] == {"rewritten": 2, "kept": 0, "undecryptable": 0}
        assert counts["tenancy.ssoconfig"] == {"rewritten": 1, "kept": 0, "undecryptable": 0}
        assert raw("events_webhookendpoint", "secret", created.pk) != before

        settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY]  # the old key dropped
        again = WebhookEndpoint.objects.get(pk=created.pk)
        assert (again.secret, again.previous_secret) == (rotated.secret, created.secret)
        assert SsoConfig.objects.get(pk=config.pk).client_secret == "the-client-secret"
        assert rotate_command()["events.webhookendpoint"] == {
            "rewritten": 0, "kept": 2, "undecryptable": 0,
        }  # fmt: skip

    def test_the_command_fails_on_a_value_no_key_decrypts_and_leaves_it(self, cast, settings):
        settings.SECRETS_ENCRYPTION_KEYS = [OLD_KEY]
        created = endpoint(cast)
        stored = raw("events_webhookendpoint", "secret", created.pk)
        settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY]
        out = StringIO()
        with pytest.raises(CommandError, match="1 stored secret"):
            call_command("rotate_secrets_key", stdout=out)
        assert json.loads(out.getvalue())["events.webhookendpoint"]["undecryptable"] == 1
        assert raw("events_webhookendpoint", "secret", created.pk) == stored

    def test_a_wrong_key_is_a_clear_error_where_the_secret_is_read_not_when_loaded(
        self, cast, settings
    ):
        settings.SECRETS_ENCRYPTION_KEYS = [OLD_KEY]
        created = endpoint(cast)
        settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY]
        loaded = WebhookEndpoint.objects.get(pk=created.pk)  # a list page loads it fine
        loaded.description = "still editable"
        loaded.save()
        with pytest.raises(SecretUndecryptable, match="cannot be decrypted"):
            _ = loaded.secret
        # A rotation moves the unreadable secret aside and gives a working one.
        rotated = webhook_endpoint_rotate_secret(endpoint=loaded)
        assert WebhookEndpoint.objects.get(pk=created.pk).secret == rotated.secret


@pytest.mark.django_db(transaction=True)
def test_the_data_migrations_encrypt_legacy_rows_and_decrypt_them_back(cast, monkeypatch):
    from apps.events.migrations import __name__ as events_package

    migration = __import__(f"{events_package}.0014_encrypt_webhook_secrets", fromlist=["B"])
    monkeypatch.setattr(migration, "BATCH", 2)  # several batches over three rows
    created = [endpoint(cast) for _ in range(3)]
    clear = {item.pk: item.secret for item in created}
    config = sso(cast)
    _migrate(("events", "0012_delivery_indexes_for_the_log"))
    _migrate(("tenancy", "0021_org_policy_quorum"))
    try:
        activate_all_orgs()
        # Reversed: clear values again, in columns as narrow as before.
        for pk, secret in clear.items():
            assert raw("events_webhookendpoint", "secret", pk) == secret
        assert raw("tenancy_ssoconfig", "client_secret", config.pk) == "the-client-secret"
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE events_webhookendpoint SET previous_secret = 'whsec_legacy' WHERE id = %s",
                [created[0].pk],
            )
    finally:
        _migrate(("events", "0014_encrypt_webhook_secrets"))
        _migrate(("tenancy", "0023_encrypt_sso_client_secrets"))
    activate_all_orgs()
    for pk, secret in clear.items():
        stored = raw("events_webhookendpoint", "secret", pk)
        assert stored.startswith(PREFIX)
        assert WebhookEndpoint.objects.get(pk=pk).secret == secret
    assert raw("events_webhookendpoint", "previous_secret", created[0].pk).startswith(PREFIX)
    assert WebhookEndpoint.objects.get(pk=created[0].pk).previous_secret == "whsec_legacy"
    assert raw("tenancy_ssoconfig", "client_secret", config.pk).startswith(PREFIX)
    assert SsoConfig.objects.get(pk=config.pk).client_secret == "the-client-secret"


class TestDeployCheck:
    def test_a_key_derived_from_secret_key_is_warned_on_deploy(self, settings):
        settings.SECRETS_ENCRYPTION_KEYS = []
        assert [m.id for m in checks.secrets_key_derived()] == ["mirror.W002"]
        assert "mirror.W002" in [m.id for m in run_checks(include_deployment_checks=True)]
        assert "mirror.W002" not in [m.id for m in run_checks()]

    def test_configured_keys_pass(self, settings):
        settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY]
        assert checks.secrets_key_derived() == []
