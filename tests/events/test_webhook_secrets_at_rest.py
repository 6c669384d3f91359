"""A webhook whose signing secret is stored encrypted: signed as before (verified by
``standardwebhooks`` at a real receiver), also after the encryption key was rotated; and a
secret no configured key decrypts is a delivery not sent, said in its log and the service's,
that does not count against the receiver and goes out once the key is back."""

from __future__ import annotations

import logging

import pytest
from cryptography.fernet import Fernet
from django.utils import timezone

from apps.events.delivery import delivery_attempt
from apps.events.models import Delivery, WebhookEndpoint
from apps.events.services import webhook_endpoint_rotate_secret
from apps.policy.services import policy_deploy
from tests.events.conftest import fan_out, work
from tests.events.test_webhook_delivery import POLICY, _deliveries_settled, _endpoint

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

OLD_KEY, NEW_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def _attempt() -> str:
    """One attempt of the only delivery, due now (made by the fan-out at the first)."""
    if not Delivery.objects.exists():
        fan_out()
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    return delivery_attempt(delivery.pk)


def test_both_secrets_of_a_rotation_sign_after_the_encryption_key_was_rotated(
    cast, receiver, settings
) -> None:
    settings.SECRETS_ENCRYPTION_KEYS = [OLD_KEY]
    endpoint = _endpoint(cast.acme, receiver, ["policy.deployed"])
    rotated = webhook_endpoint_rotate_secret(endpoint=endpoint)
    receiver.secrets.append(rotated.secret)
    settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY, OLD_KEY]

    policy_deploy(org=cast.acme, toml=POLICY)
    work(_deliveries_settled)
    assert Delivery.objects.get().status == "succeeded"
    [item] = receiver.wait_for(1)
    assert sorted(item.verified_with) == sorted([endpoint.secret, rotated.secret])


def test_a_secret_no_key_decrypts_is_not_sent_and_goes_out_once_the_key_is_back(
    cast, receiver, settings, caplog
) -> None:
    settings.SECRETS_ENCRYPTION_KEYS = [OLD_KEY]
    endpoint = _endpoint(cast.acme, receiver, ["policy.deployed"])
    settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY]  # the old key left out by mistake
    settings.WEBHOOK_DISABLE_AFTER_FAILURES = 1
    policy_deploy(org=cast.acme, toml=POLICY)

    with caplog.at_level(logging.ERROR, logger="apps.events.delivery"):
        assert _attempt() == "will retry"
    delivery = Delivery.objects.get()
    assert delivery.status == "pending"
    assert delivery.last_error.startswith("not sent: a stored secret cannot be decrypted")
    assert "SECRETS_ENCRYPTION_KEYS" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]  # one line, no traceback
    again = WebhookEndpoint.objects.get(pk=endpoint.pk)
    assert (again.enabled, again.consecutive_failures) == (True, 0)
    assert receiver.received == receiver.unverified == []

    settings.SECRETS_ENCRYPTION_KEYS = [NEW_KEY, OLD_KEY]
    assert _attempt() == "delivered"
    [item] = receiver.wait_for(1)
    assert item.verified_with == [endpoint.secret]
