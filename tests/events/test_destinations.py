"""Outbound requests: non-public destinations refused (every resolved address checked),
no redirect followed, the answer's read capped."""

from __future__ import annotations

import contextlib
import socket
from http import HTTPStatus

import pytest

from apps.events.destinations import NOT_PUBLIC as REFUSAL
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


def test_a_name_with_any_private_address_is_refused_without_naming_it(
    production_rules, monkeypatch
) -> None:
    def two_addresses(host, port, *args, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    with pytest.raises(DestinationRefused) as refused:
        check_url("https://hooks.example.com/x")
    assert refused.value.message == REFUSAL


def test_the_refusal_names_the_setting_that_allows_it_in_development(
    production_rules, settings
) -> None:
    settings.DEBUG = False
    with pytest.raises(DestinationRefused) as refused:
        check_url("http://10.1.2.3/hook")
    assert refused.value.message.startswith("url: not a public destination")
    assert "WEBHOOK_ALLOW_PRIVATE_DESTINATIONS" in refused.value.message
    assert "10.1.2.3" not in refused.value.message


# Classification only: nothing here is ever connected to.
NOT_PUBLIC = [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "0.0.0.0", "255.255.255.255", "224.0.1.1",  # noqa: S104 (classified, never bound)
    "192.0.0.8", "192.0.0.9", "192.0.0.170", "192.0.0.255",  # IETF protocol assignments
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "198.18.0.1", "203.0.113.5", "240.0.0.1",
    "::", "::1", "fe80::1", "fe80::1%eth0", "fd00::1", "ff0e::1", "2001:db8::1", "3fff::1",
    "fec0::1", "feff::1",  # deprecated site-local
    "2002:7f00:1::1", "2002:a00:1::", "2002:a9fe:a9fe::1", "2002:c0a8:101::", "2002:6440:1::",
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1",  # NAT64 of private addresses
    "64:ff9b:1::808:808",  # local-use NAT64 prefix
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",  # IPv4-mapped
    "::127.0.0.1", "::a9fe:a9fe",  # IPv4-compatible (deprecated)
]  # fmt: skip
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.215.14", "2606:4700::1111", "2001:4860:4860::8888",
          "::ffff:8.8.8.8", "64:ff9b::808:808"]  # fmt: skip


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_addresses_that_are_not_globally_reachable_are_not_public(address) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", PUBLIC)
def test_globally_reachable_addresses_are_public(address) -> None:
    assert is_public(address)


def test_public_addresses_pass(production_rules, monkeypatch) -> None:
    public = ("93.184.215.14", 443)
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", public)]
    )
    check_url("https://hooks.example.com/x")


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
    assert response.json()["detail"] == REFUSAL
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
    assert delivery.last_error == REFUSAL
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


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_name_resolving_to_loopback_is_reached_at_the_checked_address_or_refused(
    cast, receiver, settings, monkeypatch
) -> None:
    """The name is resolved once per attempt and the connection goes to the address that
    was classified (no second lookup a rebinding DNS could answer differently); when
    private destinations are not allowed, the same name is refused at creation and at
    every attempt, without the addresses it resolved to."""
    port = receiver.url.split(":")[2].split("/")[0]
    url = f"http://localhost:{port}/hooks"
    looked_up: list[str] = []
    real = socket.getaddrinfo

    def spy(host, *args, **kwargs):
        looked_up.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    endpoint = webhook_endpoint_create(org=cast.acme, url=url, event_types=["policy.deployed"])
    receiver.secrets.append(endpoint.secret)
    looked_up.clear()
    assert post(url, b"{}", {}).status == 200
    assert looked_up.count("localhost") == 1
    assert len(receiver.unverified) == 1

    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = False
    with pytest.raises(DestinationRefused) as refused:
        check_url(url)
    assert refused.value.message == REFUSAL
    settings.WEBHOOK_RETRY_WINDOW_SECONDS = 1
    policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))

    work(lambda: not Delivery.objects.filter(status__in=["pending", "sending"]).exists())

    delivery = Delivery.objects.get(endpoint=endpoint)
    assert (delivery.status, delivery.last_status_code) == ("failed", None)
    assert delivery.last_error == REFUSAL
    assert receiver.received == []
    assert len(receiver.unverified) == 1  # only the request sent while it was allowed
