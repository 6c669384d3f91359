"""/metrics: off by default, loopback only, and the counters the services feed."""

from __future__ import annotations

import os
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from apps.common import metrics

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def enabled(settings):
    settings.METRICS_ENABLED = True
    return settings


def test_it_is_off_by_default_and_answers_404_in_the_profile_body(api_client):
    assert django_settings.METRICS_ENABLED is False
    response = api_client.get("/metrics")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json() == {"detail": "not found"}


def test_enabled_it_serves_the_prometheus_text_format_to_loopback(api_client, enabled):
    response = api_client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"].startswith("text/plain")
    names = {family.name for family in text_string_to_metric_families(response.text)}
    assert {
        "mirror_http_requests",
        "mirror_receipt_push_duration_seconds",
        "mirror_receipts_appended",
        "mirror_receipts_refused",
        "mirror_approval_transitions",
        "mirror_rate_limit_hits",
        "mirror_over_capacity",
    } <= names


def test_ipv6_loopback_is_allowed_by_default(api_client, enabled):
    assert api_client.get("/metrics", REMOTE_ADDR="::1").status_code == HTTPStatus.OK


@pytest.mark.parametrize("address", ["10.1.2.3", "192.0.2.7", "2001:db8::1", "not-an-ip", ""])
def test_other_addresses_are_forbidden(api_client, enabled, address):
    response = api_client.get("/metrics", REMOTE_ADDR=address)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "detail" in response.json()


def test_allowed_networks_are_cidrs(api_client, enabled):
    enabled.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    assert api_client.get("/metrics", REMOTE_ADDR="10.200.0.9").status_code == HTTPStatus.OK
    assert api_client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == (HTTPStatus.FORBIDDEN)


def test_a_request_relayed_by_the_proxy_is_forbidden_even_from_loopback(api_client, enabled):
    response = api_client.get(
        "/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9"
    )
    assert response.status_code == HTTPStatus.FORBIDDEN


def test_the_team_path_profile_refuses_in_its_own_body(api_client, enabled):
    enabled.API_PROFILE = "teampath"
    enabled.ROOT_URLCONF = "config.urls.teampath"
    response = api_client.get("/metrics", REMOTE_ADDR="10.9.9.9")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json()["error"] == "forbidden"


@pytest.mark.parametrize("method", ["QUERY", "POST", "DELETE"])
def test_a_method_it_does_not_serve_is_405_with_allow_in_the_profile_body(method, settings):
    # As a browser or any client would send it: no CSRF exemption from the test client.
    client = APIClient(enforce_csrf_checks=True)
    response = client.generic(method, "/metrics")
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert response["Allow"] == "GET, HEAD"
    assert response.json() == {"detail": f"method {method} is not allowed here"}
    settings.API_PROFILE = "teampath"
    settings.ROOT_URLCONF = "config.urls.teampath"
    assert client.generic(method, "/metrics").json()["error"] == "method_not_allowed"


def test_requests_are_counted_by_route_and_status(api_client):
    before = sample("mirror_http_requests_total", route="healthz", method="GET", status="200")
    api_client.get("/healthz")
    api_client.get("/healthz")
    after = sample("mirror_http_requests_total", route="healthz", method="GET", status="200")
    assert after - before == 2


def test_a_pushed_receipt_is_counted_and_timed(api_client, cast):
    from tests.receipts.factories import Agent, as_text

    counted = {"route": "receipt-push", "method": "POST", "status": "201"}
    before = sample("mirror_http_requests_total", **counted)
    timed_before = sample("mirror_receipt_push_duration_seconds_count")
    response = api_client.generic(
        "POST",
        "/v1/receipts",
        '{"receipt":' + as_text(Agent().receipt()) + "}",
        content_type="application/json",
        HTTP_X_API_KEY=cast.acme_key.secret,
    )
    assert response.status_code == HTTPStatus.CREATED
    assert sample("mirror_http_requests_total", **counted) - before == 1
    assert sample("mirror_receipt_push_duration_seconds_count") - timed_before == 1


def test_the_helpers_increment_their_counters():
    before = {
        "appended": sample("mirror_receipts_appended_total", profile="keyscoped"),
        "refused": sample("mirror_receipts_refused_total", kind="SignatureInvalid"),
        "approval": sample("mirror_approval_transitions_total", to_status="approved"),
        "limited": sample("mirror_rate_limit_hits_total", plane="sdk"),
    }
    metrics.receipts_appended("keyscoped")
    metrics.receipts_refused("SignatureInvalid")
    metrics.approval_transition("approved")
    metrics.rate_limit_hit("sdk")
    assert sample("mirror_receipts_appended_total", profile="keyscoped") == before["appended"] + 1
    assert sample("mirror_receipts_refused_total", kind="SignatureInvalid") == before["refused"] + 1
    assert sample("mirror_approval_transitions_total", to_status="approved") == (
        before["approval"] + 1
    )
    assert sample("mirror_rate_limit_hits_total", plane="sdk") == before["limited"] + 1


def test_unknown_methods_share_one_label(api_client):
    before = sample("mirror_http_requests_total", route="healthz", method="other", status="405")
    api_client.generic("BREW", "/healthz")
    assert (
        sample("mirror_http_requests_total", route="healthz", method="other", status="405")
        == before + 1
    )


def test_with_a_multiprocess_directory_the_view_sums_every_worker(
    api_client, enabled, tmp_path, monkeypatch
):
    # Two "workers": separate processes that count into the shared directory.
    code = (
        "import django; django.setup();"
        "from apps.common import metrics; metrics.receipts_appended('teampath', 3)"
    )
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
    }
    for _ in range(2):
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    response = api_client.get("/metrics")
    assert response.status_code == HTTPStatus.OK
    (family,) = [
        f
        for f in text_string_to_metric_families(response.text)
        if f.name == "mirror_receipts_appended"
    ]
    totals = [s.value for s in family.samples if s.labels.get("profile") == "teampath"]
    assert totals == [6.0]


def test_disabled_on_the_team_path_profile_it_is_its_404(api_client, settings):
    settings.API_PROFILE = "teampath"
    settings.ROOT_URLCONF = "config.urls.teampath"
    response = api_client.get("/metrics")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json()["error"] == "not_found"


def test_pushes_count_appended_and_refused_receipts_by_kind(
    push, cast, django_capture_on_commit_callbacks
):
    from tests.receipts.factories import Agent

    appended = sample("mirror_receipts_appended_total", profile="keyscoped")
    refused = sample("mirror_receipts_refused_total", kind="Malformed")
    with django_capture_on_commit_callbacks(execute=True):
        assert push(Agent().receipt()).status_code == HTTPStatus.CREATED
    assert push.raw('{"receipt": {"content": {}}}').status_code == 422
    assert sample("mirror_receipts_appended_total", profile="keyscoped") == appended + 1
    assert sample("mirror_receipts_refused_total", kind="Malformed") == refused + 1


def test_a_limited_request_is_counted(cast, settings):
    from rest_framework.test import APIClient

    from apps.tenancy.services import org_set_limits

    settings.RATE_LIMITS_ENABLED = True
    org_set_limits(org=cast.globex, rate_per_minute=1, rate_burst=1)
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.globex_key.secret)
    limited = sample("mirror_rate_limit_hits_total", plane="sdk")
    statuses = [client.get("/v1/policy/pull").status_code for _ in range(2)]
    assert statuses[-1] == HTTPStatus.TOO_MANY_REQUESTS
    assert sample("mirror_rate_limit_hits_total", plane="sdk") >= limited + 1
