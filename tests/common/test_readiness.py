"""/readyz: database, cache and migrations; 503 with Retry-After names what failed."""

from __future__ import annotations

import socket
from http import HTTPStatus
from unittest import mock

import pytest
from django.core.cache import caches
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor

from apps.common import readiness

pytestmark = pytest.mark.django_db

DEAD_REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
    }
}


@pytest.fixture(autouse=True)
def fresh_migrations_state():
    readiness.forget_migrations_state()
    yield
    readiness.forget_migrations_state()


def redis_is_up() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.2).close()
    except OSError:
        return False
    return True


def test_it_is_ready_when_everything_answers(api_client):
    response = api_client.get("/readyz")
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "cache": "ok", "migrations": "ok"},
        "task_queue": {"ready": 0, "oldest_ready_seconds": None},
    }


def test_it_needs_no_credential(api_client):
    assert api_client.get("/readyz", HTTP_X_API_KEY="hk_nonsense").status_code == HTTPStatus.OK


def test_an_unreachable_database_is_503_with_retry_after(api_client, settings):
    settings.RETRY_AFTER_SECONDS = 3
    with mock.patch.object(
        BaseDatabaseWrapper, "ensure_connection", side_effect=OperationalError("refused")
    ):
        response = api_client.get("/readyz")
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert response["Retry-After"] == "3"
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "failed", "cache": "ok", "migrations": "skipped"},
        "failed": ["database", "migrations"],
    }


def test_an_unreachable_cache_is_503(api_client, settings):
    settings.CACHES = DEAD_REDIS
    try:
        response = api_client.get("/readyz")
    finally:
        caches["default"].close()
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert response.json()["checks"]["cache"] == "failed"
    assert response.json()["failed"] == ["cache"]


@pytest.mark.skipif(not redis_is_up(), reason="needs Redis at 127.0.0.1:6379")
def test_a_reachable_redis_is_ready(api_client, settings):
    settings.CACHES = {**DEAD_REDIS, "default": {**DEAD_REDIS["default"]}}
    settings.CACHES["default"]["LOCATION"] = "redis://127.0.0.1:6379/15"
    try:
        response = api_client.get("/readyz")
    finally:
        caches["default"].close()
    assert response.json()["checks"]["cache"] == "ok"


def test_pending_migrations_are_503_until_applied_then_the_answer_is_kept(api_client):
    with mock.patch.object(MigrationExecutor, "migration_plan", return_value=[("0002", False)]):
        pending = api_client.get("/readyz")
    assert pending.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert pending.json()["checks"]["migrations"] == "pending"

    assert api_client.get("/readyz").status_code == HTTPStatus.OK
    with mock.patch.object(MigrationExecutor, "migration_plan") as plan:
        assert api_client.get("/readyz").status_code == HTTPStatus.OK
    plan.assert_not_called()


def test_a_failing_check_is_logged_not_raised(caplog):
    with mock.patch.object(
        BaseDatabaseWrapper, "ensure_connection", side_effect=OperationalError("refused")
    ):
        result = readiness.readiness()
    assert not result.ready
    assert any("readiness check database failed" in r.getMessage() for r in caplog.records)


def test_a_503_is_logged_once_at_warning_not_again_at_error(api_client, caplog):
    with mock.patch.object(MigrationExecutor, "migration_plan", return_value=[("0002", False)]):
        assert api_client.get("/readyz").status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert [r.levelname for r in caplog.records if r.name.startswith(("apps", "django"))] == [
        "WARNING"
    ]


def test_the_team_path_profile_serves_both_probes(api_client, settings):
    settings.API_PROFILE = "teampath"
    settings.ROOT_URLCONF = "config.urls.teampath"
    assert api_client.get("/healthz").json() == {"status": "ok"}
    assert api_client.get("/readyz").json()["status"] == "ready"
