"""Rate limits across both profiles and both planes: every header, every refusal, the
overrides, and the limiter's behaviour without Redis. Time is a fake clock, never a sleep."""

from __future__ import annotations

import logging
import math
import random
import time
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.test import Client
from rest_framework.test import APIClient

from apps.api import throttles
from apps.api.throttles import DashboardRateThrottle, OrgRateThrottle
from apps.policy.services import policy_deploy
from apps.tenancy.limits import take
from apps.tenancy.models import Org, Plan
from apps.tenancy.services import org_set_limits

HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")

POLICY = """\
[[rule]]
id = "search.allow"
order = 10
enabled = true
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "allow"
"""


class FakeClock:
    def __init__(self) -> None:
        self.now = 2_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(settings: Any, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    settings.RATE_LIMITS_ENABLED = True
    cache.clear()
    fake = FakeClock()
    monkeypatch.setattr(OrgRateThrottle, "clock", staticmethod(fake))
    monkeypatch.setattr(DashboardRateThrottle, "clock", staticmethod(fake))
    return fake


@pytest.fixture
def hits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The planes passed to ``metrics.rate_limit_hit``, in order."""
    planes: list[str] = []
    monkeypatch.setattr(throttles.metrics, "rate_limit_hit", planes.append)
    return planes


def key_scoped(secret: str | None) -> APIClient:
    client = APIClient()
    if secret is not None:
        client.credentials(HTTP_X_API_KEY=secret)
    return client


def team_path(secret: str | None) -> APIClient:
    client = APIClient()
    if secret is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def rate_headers(response: Any) -> dict[str, str]:
    return {name: response[name] for name in HEADERS if name in response}


# --- the algorithm ---------------------------------------------------------------------------


def test_retry_after_is_never_zero_and_always_enough(clock: FakeClock) -> None:
    """Whatever the rate, the burst and the fraction of a second, a refusal's Retry-After
    is at least 1, and a request made that many seconds later is admitted."""
    rng = random.Random(20261123)
    for case in range(300):
        per_minute = rng.choice([1, 2, 7, 59, 60, 61, 600, 6_000, 600_000])
        burst = rng.randint(1, 5)
        key = f"sweep-{case}"
        clock.now += rng.random() * 10
        while take(key, per_minute=per_minute, burst=burst, clock=clock).allowed:
            clock.now += rng.random() * (60 / per_minute) * 0.5
        refused = take(key, per_minute=per_minute, burst=burst, clock=clock)
        assert not refused.allowed
        assert refused.retry_after_seconds >= 1, (per_minute, burst)
        assert refused.remaining == 0
        clock.now += refused.retry_after_seconds
        assert take(key, per_minute=per_minute, burst=burst, clock=clock).allowed


def test_reset_counts_the_seconds_until_the_bucket_is_full_again(clock: FakeClock) -> None:
    for _ in range(3):
        last = take("reset", per_minute=60, burst=3, clock=clock)
    assert (last.remaining, last.reset_seconds) == (0, 3)
    clock.now += 1.5  # one and a half tokens back
    again = take("reset", per_minute=60, burst=3, clock=clock)
    assert (again.allowed, again.remaining, again.reset_seconds) == (True, 0, 3)
    clock.now += 2.5  # full again, as the last Reset said (2.5 s rounded up)
    full = take("reset", per_minute=60, burst=3, clock=clock)
    assert (full.remaining, full.reset_seconds) == (2, 1)


# --- key-scoped SDK plane ----------------------------------------------------------------------


def test_every_key_scoped_answer_after_authentication_carries_the_headers(cast) -> None:
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=5)
    client = key_scoped(cast.acme_key.secret)
    answers = {
        "ok": client.get("/v1/policy/pull"),
        "422": client.post("/v1/receipts", "nope", content_type="text/plain"),
        "404": client.get("/v1/approvals/00000000-0000-0000-0000-000000000000"),
        "403": key_scoped(cast.acme_policy_only_key.secret).post("/v1/receipts", {}, format="json"),
    }
    assert {name: answer.status_code for name, answer in answers.items()} == {
        "ok": 200,
        "422": 422,
        "404": 404,
        "403": 403,
    }
    assert [rate_headers(answer) for answer in answers.values()] == [
        {"RateLimit-Limit": "5", "RateLimit-Remaining": str(4 - n), "RateLimit-Reset": str(n + 1)}
        for n in range(4)
    ]


def test_a_request_refused_for_its_scope_still_counts(cast, hits) -> None:
    """Throttling comes right after authentication, before the scope check."""
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=2)
    read_only = key_scoped(cast.acme_policy_only_key.secret)
    statuses = [read_only.post("/v1/receipts", {}, format="json").status_code for _ in range(3)]
    assert statuses == [403, 403, 429]
    assert hits == ["sdk"]


def test_without_a_valid_credential_nothing_is_counted_or_sent(cast) -> None:
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=2)
    for answer in (
        key_scoped(None).get("/v1/policy/pull"),
        key_scoped(cast.acme_key.secret[:-2] + "xx").get("/v1/policy/pull"),
    ):
        assert answer.status_code == HTTPStatus.UNAUTHORIZED
        assert rate_headers(answer) == {}
    assert key_scoped(cast.acme_key.secret).get("/v1/policy/pull")["RateLimit-Remaining"] == "1"


def test_the_key_scoped_429_is_a_detail_body_with_retry_after(cast, clock, hits) -> None:
    org_set_limits(org=cast.acme, rate_per_minute=4, rate_burst=1)  # one every 15 s
    client = key_scoped(cast.acme_key.secret)
    assert client.get("/v1/policy/pull").status_code == HTTPStatus.OK
    clock.now += 0.25
    refused = client.get("/v1/policy/pull")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert list(refused.json()) == ["detail"]
    assert "15 seconds" in refused.json()["detail"]
    assert refused["Retry-After"] == "15"  # 14.75 rounded up: never early
    assert rate_headers(refused) == {
        "RateLimit-Limit": "1",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "15",
    }
    assert hits == ["sdk"]
    clock.now += 14.75
    assert client.get("/v1/policy/pull").status_code == HTTPStatus.OK


def test_a_fast_rate_still_answers_retry_after_one(cast) -> None:
    org_set_limits(org=cast.acme, rate_per_minute=600_000, rate_burst=1)
    client = key_scoped(cast.acme_key.secret)
    client.get("/v1/policy/pull")
    refused = client.get("/v1/policy/pull")
    assert (refused.status_code, refused["Retry-After"]) == (429, "1")


PLAN_LIMITS = {
    "free": {"per_minute": 6, "burst": 2},
    "pro": {"per_minute": 12, "burst": 3},
    "team": {"per_minute": 20, "burst": 4},
    "custom": {"per_minute": 30, "burst": 5},
}


@pytest.mark.parametrize("plan", list(Plan))
def test_each_plan_has_its_own_rate_and_burst_from_settings(cast, settings, plan) -> None:
    settings.RATE_LIMITS = PLAN_LIMITS
    Org.objects.filter(pk=cast.acme.pk).update(plan=plan)
    expected = PLAN_LIMITS[plan]
    client = key_scoped(cast.acme_key.secret)
    answers = [client.get("/v1/policy/pull") for _ in range(expected["burst"] + 1)]
    assert [a.status_code for a in answers] == [200] * expected["burst"] + [429]
    assert answers[0]["RateLimit-Limit"] == str(expected["burst"])
    assert answers[-1]["Retry-After"] == str(math.ceil(60 / expected["per_minute"]))


def test_an_org_override_replaces_only_what_it_names(cast, settings) -> None:
    settings.RATE_LIMITS = PLAN_LIMITS  # acme is pro: 12 a minute, burst 3
    org_set_limits(org=cast.acme, rate_burst=1)
    client = key_scoped(cast.acme_key.secret)
    assert client.get("/v1/policy/pull")["RateLimit-Limit"] == "1"
    assert client.get("/v1/policy/pull")["Retry-After"] == "5"  # the plan's 12 a minute
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=None)
    assert cast.acme.effective_rate == (60, 3)


def test_switched_off_no_request_is_refused_or_labelled(cast, settings) -> None:
    settings.RATE_LIMITS_ENABLED = False
    org_set_limits(org=cast.acme, rate_per_minute=1, rate_burst=1)
    client = key_scoped(cast.acme_key.secret)
    answers = [client.get("/v1/policy/pull") for _ in range(3)]
    assert [a.status_code for a in answers] == [200] * 3
    assert [rate_headers(a) for a in answers] == [{}] * 3


# --- team-path SDK plane -----------------------------------------------------------------------


@pytest.mark.urls("config.urls.teampath")
def test_every_team_path_answer_after_authentication_carries_the_headers(cast, settings) -> None:
    settings.API_PROFILE = "teampath"
    policy_deploy(org=cast.acme, toml=POLICY)
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=5)
    answers = [
        team_path(cast.acme_key.secret).get("/v1/teams/acme/policy"),
        team_path(cast.acme_key.secret).get("/v1/teams/globex/policy"),  # team_not_found
        team_path(cast.acme_key.secret).post("/v1/receipts", "{", content_type="application/json"),
        team_path(cast.acme_policy_only_key.secret).post("/v1/receipts", {}, format="json"),
    ]
    assert [a.status_code for a in answers] == [200, 404, 400, 403]
    assert [a["RateLimit-Remaining"] for a in answers] == ["4", "3", "2", "1"]
    assert {a["RateLimit-Limit"] for a in answers} == {"5"}
    unauthenticated = team_path(None).get("/v1/teams/acme/policy")
    assert unauthenticated.status_code == HTTPStatus.UNAUTHORIZED
    assert rate_headers(unauthenticated) == {}


@pytest.mark.urls("config.urls.teampath")
def test_the_team_path_429_is_rate_limited_with_retry_after(cast, settings, clock, hits) -> None:
    settings.API_PROFILE = "teampath"
    policy_deploy(org=cast.acme, toml=POLICY)
    org_set_limits(org=cast.acme, rate_per_minute=6, rate_burst=2)  # one every 10 s
    client = team_path(cast.acme_key.secret)
    assert [client.get("/v1/teams/acme/policy").status_code for _ in range(2)] == [200, 200]
    clock.now += 0.5
    refused = client.get("/v1/teams/acme/policy")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    body = refused.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == "rate_limited"
    assert "10 seconds" in body["message"]
    assert refused["Retry-After"] == "10"
    assert (refused["RateLimit-Remaining"], refused["RateLimit-Reset"]) == ("0", "20")
    assert hits == ["sdk"]


@pytest.mark.urls("config.urls.teampath")
def test_a_refused_team_path_batch_is_not_read(cast, settings) -> None:
    settings.API_PROFILE = "teampath"
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=1)
    client = team_path(cast.acme_key.secret)
    client.get("/v1/teams/acme/policy")
    refused = client.post("/v1/receipts/batch", "not json", content_type="application/json")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS  # not 400 invalid_json
    assert refused.json()["error"] == "rate_limited"


# --- dashboard plane ---------------------------------------------------------------------------


def test_the_dashboard_has_its_own_limit_per_user_with_headers(
    cast, dashboard, settings, clock, hits
) -> None:
    settings.DASHBOARD_RATE_PER_MINUTE = 3  # one every 20 s
    settings.DASHBOARD_RATE_BURST = 2
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=1)
    viewer = dashboard("viewer")
    answers = [viewer.get("/v1/analytics") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert [rate_headers(a) for a in answers] == [
        {"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "20"},
        {"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "40"},
        {"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "40"},
    ]
    refused = answers[2]
    assert list(refused.json()) == ["detail"]
    assert refused["Retry-After"] == "20"
    assert hits == ["dashboard"]
    # The SDK plane's bucket (burst 1) was not touched by the dashboard's requests.
    assert key_scoped(cast.acme_key.secret).get("/v1/policy/pull").status_code == 200
    # Neither was another member's; a role refusal (auditors do not deploy) still counts.
    auditor = dashboard("auditor")
    assert auditor.get("/v1/analytics")["RateLimit-Remaining"] == "1"
    refused_role = auditor.post("/v1/policy", {}, format="json")
    assert refused_role.status_code == HTTPStatus.FORBIDDEN
    assert refused_role["RateLimit-Remaining"] == "0"
    clock.now += 20
    assert viewer.get("/v1/analytics").status_code == 200


# --- overrides: admin and database -------------------------------------------------------------


@pytest.fixture
def root(db: None) -> Client:
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    assert client.login(username="root", password="pw-root")
    return client


def _org_form(**limits: str) -> dict[str, str]:
    return {"slug": "acme", "name": "Acme", "plan": Plan.PRO, "monthly_receipt_cap": "", **limits}


def test_the_admin_overrides_an_orgs_rate_and_refuses_zero(cast, root) -> None:
    url = f"/admin/tenancy/org/{cast.acme.pk}/change/"
    saved = root.post(url, _org_form(rate_per_minute="60", rate_burst="2"))
    assert saved.status_code == HTTPStatus.FOUND
    client = key_scoped(cast.acme_key.secret)
    assert [client.get("/v1/policy/pull").status_code for _ in range(3)] == [200, 200, 429]
    refused = root.post(url, _org_form(rate_per_minute="0", rate_burst="2"))
    assert refused.status_code == HTTPStatus.OK  # the form again, with its error
    assert "greater than or equal to 1" in refused.content.decode()
    assert Org.objects.get(pk=cast.acme.pk).rate_per_minute == 60
    root.post(url, _org_form(rate_per_minute="", rate_burst=""))
    assert Org.objects.get(pk=cast.acme.pk).effective_rate == (1200, 200)  # the pro plan's


@pytest.mark.parametrize("field", ["rate_per_minute", "rate_burst"])
def test_the_database_refuses_a_zero_rate(cast, field) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Org.objects.filter(pk=cast.acme.pk).update(**{field: 0})


# --- Redis: unavailable, prefixed ---------------------------------------------------------------


@pytest.fixture
def unreachable_redis(settings: Any) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }


def test_without_redis_requests_are_admitted_unmetered_and_logged(
    cast, unreachable_redis, caplog
) -> None:
    org_set_limits(org=cast.acme, rate_per_minute=1, rate_burst=1)
    client = key_scoped(cast.acme_key.secret)
    with caplog.at_level(logging.WARNING, logger="apps.api.throttles"):
        answers = [client.get("/v1/policy/pull") for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert [rate_headers(a) for a in answers] == [{}, {}]
    assert "rate limiter unavailable" in caplog.text


def _redis_url() -> str | None:
    try:
        import redis

        url = "redis://127.0.0.1:6379/9"
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
        return url
    except Exception:
        return None


@pytest.fixture
def redis_cache(settings: Any) -> str:
    """The cache on Redis under a prefix of this test's own (no flush of a shared db)."""
    url = _redis_url()
    if url is None:
        pytest.skip("needs Redis at 127.0.0.1:6379 (CI has it)")
    prefix = f"test-{time.time_ns()}"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": prefix,
        }
    }
    return prefix


def test_on_redis_the_bucket_key_carries_the_caches_prefix(cast, redis_cache, clock) -> None:
    import redis

    clock.now = time.time()  # Redis expires the key in real time
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=2)
    client = key_scoped(cast.acme_key.secret)
    answers = [client.get("/v1/policy/pull") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert [a["RateLimit-Remaining"] for a in answers] == ["1", "0", "0"]
    raw = redis.Redis.from_url(_redis_url() or "")
    assert raw.exists(f"{redis_cache}:1:ratelimit:org:{cast.acme.pk}")
    assert raw.pttl(f"{redis_cache}:1:ratelimit:org:{cast.acme.pk}") > 0
