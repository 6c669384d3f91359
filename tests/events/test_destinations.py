"""Outbound requests: non-public destinations refused (every resolved address checked),
no redirect followed, the answer's read capped."""

from __future__ import annotations

import contextlib
import socket
from http import HTTPStatus

import pytest

from apps.events.destinations import DestinationRefused, check_url, is_public, post
from apps.events.models import Delivery, WebhookEndpoint
from apps.events.services import webhook_endpoint_create
from apps.policy.services import policy_deploy
from tests.events.conftest import work
from tests.policy.test_policy_api import rule_toml

REFUSED = [
    "http://127.0.0.1/hook",
    "http://localhost:8000/hook",
    "http://10.1.2.3/hook",
    "http://172.16.0.1/hook",
    "http://192.168.1.1/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/hook",
    "http://[fe80::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://0.0.0.0/hook",
    "http://100.64.0.1/hook",
    "http://[fd00::1]/hook",
]


@pytest.fixture
def production_rules(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = False


@pytest.mark.parametrize("url", REFUSED)
def test_private_loopback_and_link_local_destinations_are_refused(url, production_rules) -> None:
    with pytest.raises(DestinationRefused):
        check_url(url)


def test_a_name_with_any_private_address_is_refused(production_rules, monkeypatch) -> None:
    def two_addresses(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    with pytest.raises(DestinationRefused, match=r"10\.0\.0\.7"):
        check_url("https://hooks.example.com/x")


def test_public_addresses_pass(production_rules, monkeypatch) -> None:
    public = ("93.184.215.14", 443)
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", public)]
    )
    check_url("https://hooks.example.com/x")
    assert is_public("93.184.215.14")
    assert is_public("2606:4700::1111")


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "http:///x", "http://user:pw@example.com/", "file:///etc/passwd"]
)
def test_other_schemes_credentials_and_hostless_urls_are_refused(url) -> None:
    with pytest.raises(DestinationRefused):
        check_url(url)


def test_the_dashboard_api_refuses_a_private_url_with_422(
    cast, dashboard, production_rules
) -> None:
    response = dashboard("manager").post(
        "/v1/webhooks",
        {"url": "http://169.254.169.254/latest", "event_types": ["policy.deployed"]},
        format="json",
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "public destinations only" in response.json()["detail"]
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_delivery_to_an_address_that_turned_private_is_refused_at_send_time(
    cast, receiver, settings
) -> None:
    endpoint = webhook_endpoint_create(
        org=cast.acme, url=receiver.url, event_types=["policy.deployed"]
    )
    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = False  # as if the name now resolved to 127.0.0.1
    settings.WEBHOOK_RETRY_WINDOW_SECONDS = 1
    policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))

    work(lambda: not Delivery.objects.filter(status__in=["pending", "sending"]).exists())

    delivery = Delivery.objects.get(endpoint=endpoint)
    assert delivery.status == "failed"
    assert "public destinations only" in delivery.last_error
    assert receiver.received == []
    assert receiver.unverified == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_redirect_is_not_followed(cast, receiver, settings) -> None:
    settings.WEBHOOK_RETRY_WINDOW_SECONDS = 1
    webhook_endpoint_create(org=cast.acme, url=receiver.url, event_types=["policy.deployed"])
    receiver.secrets.append(WebhookEndpoint.objects.get().secret)
    receiver.plan = [("redirect", receiver.url + "/elsewhere")] * 10
    policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))

    work(lambda: not Delivery.objects.filter(status__in=["pending", "sending"]).exists())

    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.last_status_code) == ("failed", 302)
    assert all(item.headers.get("webhook-id") for item in receiver.received)
    assert len(receiver.received) == delivery.attempts  # the Location was never requested


def test_the_answer_is_read_up_to_the_cap(receiver, settings) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Big(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(10_000_000))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(b"x" * 10_000_000)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.WEBHOOK_MAX_RESPONSE_BYTES = 1024
    try:
        result = post(f"http://127.0.0.1:{server.server_address[1]}/", b"{}", {})
    finally:
        server.shutdown()
        server.server_close()
    assert result.status == 200
    assert len(result.body) == 1024


def test_the_deploy_check_warns_when_private_destinations_are_allowed(settings) -> None:
    from apps.events.checks import private_destinations_allowed

    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = True
    assert [message.id for message in private_destinations_allowed()] == ["mirror.W020"]
    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = False
    assert private_destinations_allowed() == []


@pytest.mark.parametrize(
    "url", ["http://[::1/x", "http://exa mple.com/", "http://\u2603\u2603\u2603.invalid./"]
)
def test_urls_that_do_not_parse_or_resolve_are_refused_not_500(url) -> None:
    with pytest.raises(DestinationRefused):
        check_url(url)
