"""A webhook URL often carries its credential (a Slack incoming-webhook path, a
``?token=``): only the roles that may manage endpoints (manager+) see it whole, in the
console and the API; every other reader sees it masked, on every page it reaches."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client

from apps.events.destinations import masked_url
from apps.events.models import Delivery, WebhookEndpoint
from apps.events.services import webhook_endpoint_create
from apps.policy.services import policy_deploy
from tests.events.conftest import fan_out
from tests.policy.test_policy_api import rule_toml

pytestmark = pytest.mark.django_db

SECRET_PATH = "T0AAA/B0BBB/xoxsecretpath"
SECRET_QUERY = "sekrit-token-42"
URL = f"http://127.0.0.1:9/services/{SECRET_PATH}?token={SECRET_QUERY}"
MASKED = "http://127.0.0.1:9/…"
ENDPOINTS = "/admin/events/webhookendpoint/"
DELIVERIES = "/admin/events/delivery/"


@pytest.fixture
def endpoint(cast) -> WebhookEndpoint:
    endpoint = webhook_endpoint_create(org=cast.acme, url=URL, event_types=["policy.deployed"])
    policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))
    fan_out()
    assert Delivery.objects.filter(endpoint=endpoint).exists()
    return endpoint


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def console_pages(client: Client, endpoint: WebhookEndpoint) -> dict[str, str]:
    delivery = Delivery.objects.get(endpoint=endpoint)
    paths = {
        "list": ENDPOINTS,
        "detail": f"{ENDPOINTS}{endpoint.pk}/change/",
        "history": f"{ENDPOINTS}{endpoint.pk}/history/",
        "deliveries": f"{DELIVERIES}?endpoint__id__exact={endpoint.pk}",
        "delivery": f"{DELIVERIES}{delivery.pk}/change/",
    }
    pages = {}
    for name, path in paths.items():
        response = client.get(path)
        assert response.status_code == HTTPStatus.OK, name
        pages[name] = response.content.decode()
    return pages


def test_only_managers_see_the_whole_url_on_the_console_pages(cast, endpoint) -> None:
    for role in ("viewer", "auditor"):
        pages = console_pages(member(role), endpoint)
        for name, page in pages.items():
            assert SECRET_PATH not in page, (role, name)
            assert SECRET_QUERY not in page, (role, name)
        # The deliveries list names the endpoint by description and id, with no URL at all.
        for name in ("list", "detail"):
            assert MASKED in pages[name], (role, name)
    for role in ("manager", "owner"):
        pages = console_pages(member(role), endpoint)
        assert URL.replace("&", "&amp;") in pages["list"]
        assert URL in pages["detail"]  # the form's value, to edit


def test_a_reader_cannot_find_a_url_by_searching_for_its_secret(cast, endpoint) -> None:
    page = member("viewer").get(ENDPOINTS, {"q": SECRET_QUERY}).content.decode()
    assert endpoint.endpoint_id not in page
    found = member("manager").get(ENDPOINTS, {"q": SECRET_QUERY}).content.decode()
    assert endpoint.endpoint_id in found


def test_the_api_shows_the_whole_url_to_managers_only(cast, dashboard, endpoint) -> None:
    for role, shown in (("auditor", MASKED), ("manager", URL), ("owner", URL)):
        client = dashboard(role)
        assert client.get("/v1/webhooks").json()[0]["url"] == shown, role
        assert client.get(f"/v1/webhooks/{endpoint.endpoint_id}").json()["url"] == shown, role
        deliveries = client.get(f"/v1/webhooks/{endpoint.endpoint_id}/deliveries")
        assert deliveries.status_code == HTTPStatus.OK
        assert SECRET_PATH not in deliveries.content.decode()


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://hooks.slack.com/services/T0/B0/xyz", "https://hooks.slack.com/…"),
        ("https://example.com/hook?token=abc", "https://example.com/…"),
        ("https://example.com:8443/", "https://example.com:8443/"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com/#frag", "https://example.com/…"),
        ("http://[2001:db8::1]:8080/x", "http://[2001:db8::1]:8080/…"),
        ("https://user:pw@example.com/", "https://example.com/…"),
        ("http://[not-an-address/x", "…"),
    ],
)
def test_the_masking_rule_keeps_only_scheme_host_and_port(url, masked) -> None:
    assert masked_url(url) == masked
