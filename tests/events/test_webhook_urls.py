"""Webhook URLs are stored as they go on the wire: a non-ASCII host in IDNA, a non-ASCII
path or query percent-encoded (as browsers do); what cannot be encoded is refused with a
clear error; and an attempt that fails in any way is a failed attempt, never a delivery
left ``sending``."""

from __future__ import annotations

import logging
from http import HTTPStatus

import pytest
from django.test import Client

from apps.events.destinations import DestinationRefused, encoded_url
from apps.events.models import Delivery, WebhookEndpoint
from apps.events.services import webhook_endpoint_create, webhook_endpoint_update
from apps.policy.services import policy_deploy
from tests.events.conftest import work
from tests.policy.test_policy_api import rule_toml

POLICY = rule_toml("a", "tool_call", "allow")


@pytest.mark.parametrize(
    ("url", "encoded"),
    [
        ("http://127.0.0.1:9/b\u00fccher?q=\u00fc", "http://127.0.0.1:9/b%C3%BCcher?q=%C3%BC"),
        ("https://B\u00fccher.Example/x", "https://xn--bcher-kva.example/x"),
        ("https://b\u00fccher.example:8443/\u65e5#\u00e9", "https://xn--bcher-kva.example:8443/%E6%97%A5#%C3%A9"),
        ("http://127.0.0.1:9/a%2Fb/\u00fc", "http://127.0.0.1:9/a%2Fb/%C3%BC"),  # kept escapes
        ("https://hooks.example.com/a?b=c", "https://hooks.example.com/a?b=c"),  # unchanged
    ],
)  # fmt: skip
def test_hosts_go_to_idna_and_paths_and_queries_are_percent_encoded(url, encoded) -> None:
    assert encoded_url(url) == encoded


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://\u2603.example/x", "IDNA"),  # a symbol IDNA 2008 does not allow
        ("https://a_b.b\u00fccher.example/x", "IDNA"),
        ("http://127.0.0.1:9/\ud800", "cannot be encoded"),  # a lone surrogate
        ("http://us\u00e9r@b\u00fccher.example/", "credentials"),
    ],
)
def test_what_cannot_be_encoded_is_refused_clearly(url, says) -> None:
    with pytest.raises(DestinationRefused, match=says):
        encoded_url(url)


def test_the_api_stores_and_shows_the_encoded_url(cast, dashboard) -> None:
    client = dashboard("manager")
    created = client.post(
        "/v1/webhooks",
        {"url": "http://127.0.0.1:9/h\u00e9/\u00fc?x=\u00e9", "event_types": ["policy.deployed"]},
        format="json",
    )
    assert created.status_code == HTTPStatus.CREATED
    assert created.json()["url"] == "http://127.0.0.1:9/h%C3%A9/%C3%BC?x=%C3%A9"
    assert WebhookEndpoint.objects.get().url == "http://127.0.0.1:9/h%C3%A9/%C3%BC?x=%C3%A9"
    shown = client.get(f"/v1/webhooks/{created.json()['id']}").json()
    assert shown["url"] == "http://127.0.0.1:9/h%C3%A9/%C3%BC?x=%C3%A9"


def test_the_api_refuses_a_url_too_long_once_encoded_with_422(cast, dashboard) -> None:
    # 719 characters as typed, 4,219 once encoded (six characters each)
    url = "http://127.0.0.1:9/" + "\u00fc" * 700
    response = dashboard("manager").post(
        "/v1/webhooks", {"url": url, "event_types": ["policy.deployed"]}, format="json"
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json()["detail"] == "url: at most 2000 characters once encoded"
    assert not WebhookEndpoint.objects.exists()


def test_an_update_stores_the_encoded_url_and_an_equal_one_changes_nothing(cast) -> None:
    endpoint = webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/x", event_types=["policy.deployed"]
    )
    webhook_endpoint_update(endpoint=endpoint, url="http://127.0.0.1:9/\u00fc")
    assert WebhookEndpoint.objects.get().url == "http://127.0.0.1:9/%C3%BC"


def _console() -> Client:
    client = Client()
    assert client.login(username="acme-manager", password="pw-manager")
    return client


def _form(cast, url: str) -> dict[str, object]:
    return {"org": cast.acme.pk, "url": url, "description": "", "format": "standard",
            "event_types": ["policy.deployed"], "enabled": "on"}  # fmt: skip


def test_the_console_stores_the_encoded_url_and_lists_it_as_stored(cast) -> None:
    client = _console()
    client.post(
        "/admin/events/webhookendpoint/add/", _form(cast, "http://127.0.0.1:9/\u00fc?q=\u00e9")
    )
    assert WebhookEndpoint.objects.get().url == "http://127.0.0.1:9/%C3%BC?q=%C3%A9"
    listed = client.get("/admin/events/webhookendpoint/").content.decode()
    assert "http://127.0.0.1:9/%C3%BC?q=%C3%A9" in listed


def test_the_console_refuses_a_url_too_long_once_encoded(cast) -> None:
    page = _console().post(
        "/admin/events/webhookendpoint/add/",
        _form(cast, "http://127.0.0.1:9/" + "\u00fc" * 700),
        follow=True,
    )
    assert "at most 2000 characters" in page.content.decode()
    assert not WebhookEndpoint.objects.exists()


def _new(cast, url: str) -> WebhookEndpoint:
    return webhook_endpoint_create(org=cast.acme, url=url, event_types=["policy.deployed"])


def _stored_as_before(endpoint: WebhookEndpoint, url: str) -> None:
    """A row written before URLs were encoded (no validation on this path)."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=url)


def _settled() -> bool:
    return not Delivery.objects.filter(status__in=["pending", "sending"]).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_stored_non_ascii_url_is_delivered_encoded_without_an_error_in_the_log(
    cast, receiver, caplog
) -> None:
    endpoint = _new(cast, receiver.url)
    receiver.secrets.append(endpoint.secret)
    _stored_as_before(endpoint, receiver.url + "/b\u00fccher?q=\u00fc")
    policy_deploy(org=cast.acme, toml=POLICY)

    with caplog.at_level(logging.INFO):
        work(_settled)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("succeeded", 1, 200)
    assert [item.path for item in receiver.wait_for(1)] == ["/hooks/b%C3%BCcher?q=%C3%BC"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_attempt_that_raises_is_a_failed_attempt_that_counts_towards_disabling(
    cast, receiver, settings, monkeypatch
) -> None:
    from apps.events import delivery as delivery_module

    def broken(*args: object) -> str:
        raise RuntimeError("rendering broke")

    settings.WEBHOOK_DISABLE_AFTER_FAILURES = 1
    endpoint = _new(cast, receiver.url)
    monkeypatch.setattr(delivery_module, "render", broken)
    policy_deploy(org=cast.acme, toml=POLICY)

    work(_settled)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.last_error == "internal error (RuntimeError)"
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.consecutive_failures) == (False, 1)
    assert receiver.received == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_stored_url_that_cannot_be_encoded_fails_each_attempt_and_disables_the_endpoint(
    cast, receiver, settings, caplog
) -> None:
    settings.WEBHOOK_DISABLE_AFTER_FAILURES = 1
    endpoint = _new(cast, receiver.url)
    # refused by IDNA before any lookup: nothing leaves this machine
    _stored_as_before(endpoint, "http://\u2603.example/x")
    policy_deploy(org=cast.acme, toml=POLICY)

    with caplog.at_level(logging.INFO):
        work(_settled)

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.last_error.startswith("url: the host cannot be written in IDNA")
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.consecutive_failures) == (False, 1)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
