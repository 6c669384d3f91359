"""Failed API-key and session-token authentications are limited per client address, on
both profiles: past the limit, 429 in the profile's error body with Retry-After, before
any database work, whatever the credential. The client address, the window, the switch,
the cache (Redis, and an outage of it) and the settings."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from apps.tenancy import key_cache
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.credential_limits import client_address
from tests.failure_limits import FakeTime, arm_failure_limits

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tenancy.urls")]

LIMIT = 3
WINDOW = 600
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def limits(settings: Any, monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    return arm_failure_limits(
        settings, monkeypatch, per_address=LIMIT, per_username=LIMIT, window=WINDOW
    )


def caller(address: str = "198.51.100.7", **credentials: str) -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(**credentials)
    return client


def bearer(secret: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def assert_throttled(response: Any) -> None:
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert 1 <= int(response["Retry-After"]) <= WINDOW
    assert set(response.json()) == {"detail"}
    assert response.json()["detail"].startswith("Too many failed authentications")


# --- key-scoped: API keys (x-api-key and Bearer) --------------------------------------------


def test_wrong_api_keys_from_one_address_lock_it_out_even_with_the_right_key(cast, limits):
    wrong = caller(HTTP_X_API_KEY=cast.acme_key.secret[:-2] + "xx")
    assert [wrong.get("/v1/whoami").status_code for _ in range(LIMIT)] == [401] * LIMIT
    right = caller(HTTP_X_API_KEY=cast.acme_key.secret)
    assert_throttled(right.get("/v1/whoami"))
    assert_throttled(caller(**bearer(cast.acme_key.secret)).get("/v1/whoami"))


def test_a_key_that_authenticated_this_window_passes_its_locked_address(cast, limits):
    """A cluster's agents share an egress address: one misconfigured agent must not lock
    out the others. A key that authenticated within the window is remembered; a guessed
    one never authenticated, so it stays refused before any database work."""
    good = caller(HTTP_X_API_KEY=cast.acme_key.secret)
    assert good.get("/v1/whoami").status_code == HTTPStatus.OK
    wrong = caller(HTTP_X_API_KEY=cast.acme_key.secret[:-2] + "xx")
    assert [wrong.get("/v1/whoami").status_code for _ in range(LIMIT)] == [401] * LIMIT
    assert good.get("/v1/whoami").status_code == HTTPStatus.OK
    assert_throttled(wrong.get("/v1/whoami"))
    assert_throttled(caller(HTTP_X_API_KEY=cast.globex_key.secret).get("/v1/whoami"))


def test_a_locked_out_client_is_refused_before_any_database_work(cast, limits):
    for _ in range(LIMIT):
        caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami")
    with CaptureQueriesContext(connection) as queries:
        answer = caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami")
    assert answer.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert len(queries) == 0


def test_bearer_and_x_api_key_failures_share_the_addresss_budget(cast, limits):
    caller(HTTP_X_API_KEY="hk_000000000000_one").get("/v1/whoami")
    caller(**bearer("hk_000000000000_two")).get("/v1/whoami")
    caller(**bearer("not-even-a-key")).get("/v1/whoami")
    assert_throttled(caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami"))


def test_other_addresses_and_successes_are_not_counted(cast, limits):
    for _ in range(LIMIT):
        caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami")
    elsewhere = caller("203.0.113.50", HTTP_X_API_KEY=cast.acme_key.secret)
    assert [elsewhere.get("/v1/whoami").status_code for _ in range(10)] == [200] * 10


def test_a_client_without_failures_pays_one_cache_read(cast, limits, monkeypatch, settings):
    """One read of the address's budget; a key this worker authenticated seconds ago
    (``key_cache``) is vouched for and pays none."""
    from django.core.cache import caches

    backend = caches["default"]
    calls: list[str] = []
    for name in ("get", "add", "set", "incr", "get_many"):
        real = getattr(backend, name)
        monkeypatch.setattr(
            backend, name, lambda *a, _n=name, _r=real, **k: calls.append(_n) or _r(*a, **k)
        )
    client = caller(HTTP_X_API_KEY=cast.acme_key.secret)
    assert client.get("/v1/whoami").status_code == 200
    # The first success of a window also remembers the key (one write per worker).
    assert calls == ["get", "set"]
    calls.clear()
    assert client.get("/v1/whoami").status_code == 200
    assert calls == []
    settings.API_KEY_CACHE_SECONDS = 0
    key_cache.forget_all()
    assert client.get("/v1/whoami").status_code == 200
    assert calls == ["get"]


def test_no_credential_is_401_and_not_counted(cast, limits):
    anonymous = caller()
    assert [anonymous.get("/v1/whoami").status_code for _ in range(LIMIT + 2)] == [401] * 5
    assert caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami").status_code == 200


def test_the_lockout_ends_with_its_window(cast, limits):
    for _ in range(LIMIT):
        caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami")
    refused = caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    limits.now += int(refused["Retry-After"]) - 1
    assert caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami").status_code == 429
    limits.now += 1  # Retry-After is never early
    assert caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami").status_code == 200


def test_the_lockout_is_one_warning_line_without_a_traceback(cast, limits, caplog):
    caplog.set_level(logging.WARNING, logger="apps.tenancy.credential_limits")
    for _ in range(LIMIT + 3):
        caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami")
    lines = [r for r in caplog.records if r.name == "apps.tenancy.credential_limits"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.WARNING
    assert lines[0].exc_info is None
    assert "address 198.51.100.7" in lines[0].getMessage()
    assert f"{LIMIT} failures within {WINDOW} s" in lines[0].getMessage()


def test_the_switch_turns_the_limit_off(cast, limits, settings):
    settings.AUTH_FAILURE_LIMITS_ENABLED = False
    for _ in range(LIMIT + 2):
        assert caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami").status_code == 401
    assert caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami").status_code == 200


# --- dashboard plane: session tokens and refresh tokens -----------------------------------


def test_wrong_session_tokens_lock_the_address_out_of_the_dashboard(cast, limits):
    user = get_user_model().objects.get(username="acme-auditor")
    tokens = console_tokens_issue(user=user, org_slug="acme")
    forged = tokens.access[:-4] + "AAAA"
    for _ in range(LIMIT):
        assert caller(**bearer(forged)).get("/v1/dashboard-probe").status_code == 401
    assert_throttled(caller(**bearer(tokens.access)).get("/v1/dashboard-probe"))
    # The same budget: API keys from that address are refused too.
    assert_throttled(caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami"))


def test_refused_refresh_tokens_count_and_a_locked_out_refresh_is_429(cast, limits):
    user = get_user_model().objects.get(username="acme-auditor")
    tokens = console_tokens_issue(user=user, org_slug="acme")
    for _ in range(LIMIT):
        answer = caller().post("/v1/console/token/refresh", {"refresh": "x.y.z"}, format="json")
        assert answer.status_code == HTTPStatus.UNAUTHORIZED
    locked = caller().post("/v1/console/token/refresh", {"refresh": tokens.refresh}, format="json")
    assert_throttled(locked)
    assert locked["Cache-Control"] == "no-store"
    assert (
        caller("203.0.113.50")
        .post("/v1/console/token/refresh", {"refresh": tokens.refresh}, format="json")
        .status_code
        == HTTPStatus.OK
    )


# --- team-path: Bearer API keys ------------------------------------------------------------


@pytest.mark.urls("config.urls.teampath")
def test_team_path_answers_its_own_429_body(cast, limits, settings):
    settings.API_PROFILE = "teampath"
    for _ in range(LIMIT):
        wrong = caller(**bearer("hk_000000000000_guess")).get("/v1/teams/acme/policy")
        assert wrong.status_code == HTTPStatus.UNAUTHORIZED
        assert wrong.json()["error"] == "unauthorized"
    answer = caller(**bearer(cast.acme_key.secret)).get("/v1/teams/acme/policy")
    assert answer.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert 1 <= int(answer["Retry-After"]) <= WINDOW
    body = answer.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == "rate_limited"
    assert body["message"].startswith("Too many failed authentications")


# --- the client address ---------------------------------------------------------------------


def request_from(remote: str, forwarded: str | None = None) -> Any:
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/", **extra)


def test_a_direct_client_cannot_pick_its_address_with_x_forwarded_for(settings):
    settings.TRUSTED_PROXY_IPS = ["127.0.0.1", "::1"]
    assert client_address(request_from("203.0.113.9", "192.0.2.1")) == "203.0.113.9"


def test_behind_a_trusted_proxy_the_client_is_the_address_the_proxy_appended(settings):
    settings.TRUSTED_PROXY_IPS = ["127.0.0.1", "10.0.0.0/8"]
    # nginx's $proxy_add_x_forwarded_for: whatever the client sent, then its own peer.
    assert client_address(request_from("127.0.0.1", "192.0.2.1, 203.0.113.9")) == "203.0.113.9"
    # Two proxies we trust: the first untrusted address from the right.
    assert client_address(request_from("127.0.0.1", "203.0.113.9, 10.1.2.3")) == "203.0.113.9"
    # Garbage only the client could have written stops the walk at the last good hop.
    assert client_address(request_from("127.0.0.1", "junk, 10.1.2.3")) == "10.1.2.3"
    assert client_address(request_from("127.0.0.1")) == "127.0.0.1"


def test_a_unix_socket_peer_is_a_local_proxy(settings):
    settings.TRUSTED_PROXY_IPS = ["127.0.0.1"]
    assert client_address(request_from("", "203.0.113.9")) == "203.0.113.9"
    assert client_address(request_from("")) == "local"


def test_ipv6_clients_are_counted_per_64_and_mapped_ipv4_as_ipv4(settings):
    first = client_address(request_from("2001:db8:1:2::1"))
    assert first == client_address(request_from("2001:db8:1:2:ffff::9")) == "2001:db8:1:2::/64"
    assert client_address(request_from("2001:db8:1:3::1")) != first
    assert client_address(request_from("::ffff:203.0.113.9")) == "203.0.113.9"


# --- the cache --------------------------------------------------------------------------------


def _redis_url() -> str | None:
    import redis

    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except Exception:
        return None


def test_on_redis_every_worker_shares_the_count(cast, limits, settings):
    url = _redis_url()
    if url is None:
        pytest.skip("needs Redis at 127.0.0.1:6379 (CI has it)")
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": f"test-{time.time_ns()}",
        }
    }
    for _ in range(LIMIT):
        caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami")
    assert_throttled(caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami"))


def test_a_cache_outage_admits_credentials_and_is_logged(cast, limits, settings, caplog):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    caplog.set_level(logging.WARNING, logger="apps.tenancy.credential_limits")
    for _ in range(LIMIT + 1):
        assert caller(HTTP_X_API_KEY="hk_000000000000_guess").get("/v1/whoami").status_code == 401
    assert caller(HTTP_X_API_KEY=cast.acme_key.secret).get("/v1/whoami").status_code == 200
    assert any("counter unavailable" in record.getMessage() for record in caplog.records)


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AUTH_FAILURES_PER_ADDRESS", "0"),
        ("LOGIN_FAILURES_PER_USERNAME", "ten"),
        ("AUTH_FAILURE_WINDOW_SECONDS", "-5"),
        ("AUTH_FAILURE_LIMITS_ENABLED", "maybe"),
        ("TRUSTED_PROXY_IPS", "proxy.internal"),
    ],
)
def test_the_limit_settings_are_parsed_strictly(name, value):
    environment = {**os.environ, name: value}
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings.base"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert name in result.stderr


def test_every_limit_setting_is_listed_in_env_example():
    listed = (ROOT / ".env.example").read_text()
    for name in (
        "AUTH_FAILURE_LIMITS_ENABLED",
        "AUTH_FAILURES_PER_ADDRESS",
        "LOGIN_FAILURES_PER_USERNAME",
        "AUTH_FAILURE_WINDOW_SECONDS",
        "TRUSTED_PROXY_IPS",
    ):
        assert f"\n{name}=" in listed
