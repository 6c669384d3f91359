"""Deployment invariants of the operations layer (mirror.E001, mirror.I001, mirror.W001)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from apps.common import checks

REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/0",
    }
}


def ids(messages) -> list[str]:
    return [message.id for message in messages]


class TestSharedCacheForWorkers:
    def test_several_workers_without_redis_is_an_error(self, settings):
        settings.WEB_WORKERS = 4
        assert ids(checks.shared_cache_for_workers()) == ["mirror.E001"]

    def test_several_workers_with_redis_pass(self, settings):
        settings.WEB_WORKERS = 4
        settings.CACHES = REDIS
        assert checks.shared_cache_for_workers() == []

    @pytest.mark.parametrize("workers", [0, 1])
    def test_one_worker_or_unset_passes(self, settings, workers):
        settings.WEB_WORKERS = workers
        assert checks.shared_cache_for_workers() == []

    def test_it_runs_with_every_command_and_stops_it(self, settings):
        settings.WEB_WORKERS = 3
        with pytest.raises(SystemCheckError, match=r"mirror\.E001"):
            call_command("check")


class TestDefaultWorkerCount:
    def test_unset_on_several_cores_without_redis_is_reported_on_deploy(self, settings):
        settings.WEB_WORKERS = 0
        with mock.patch("apps.common.checks.os.cpu_count", return_value=4):
            assert ids(checks.default_worker_count()) == ["mirror.I001"]
            assert "mirror.I001" in ids(run_checks(include_deployment_checks=True))
            assert "mirror.I001" not in ids(run_checks())

    def test_one_core_redis_or_an_explicit_count_pass(self, settings):
        with mock.patch("apps.common.checks.os.cpu_count", return_value=1):
            settings.WEB_WORKERS = 0
            assert checks.default_worker_count() == []
        with mock.patch("apps.common.checks.os.cpu_count", return_value=8):
            settings.WEB_WORKERS = 1
            assert checks.default_worker_count() == []
            settings.WEB_WORKERS = 0
            settings.CACHES = REDIS
            assert checks.default_worker_count() == []


class TestMetricsAcrossWorkers:
    def test_metrics_with_several_workers_need_a_multiprocess_directory(
        self, settings, monkeypatch
    ):
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
        settings.METRICS_ENABLED = True
        settings.WEB_WORKERS = 2
        assert ids(checks.metrics_across_workers()) == ["mirror.W001"]
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/run/mirror/prometheus")
        assert checks.metrics_across_workers() == []

    def test_disabled_metrics_or_one_worker_pass(self, settings, monkeypatch):
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
        settings.WEB_WORKERS = 2
        settings.METRICS_ENABLED = False
        assert checks.metrics_across_workers() == []
        settings.METRICS_ENABLED = True
        settings.WEB_WORKERS = 1
        assert checks.metrics_across_workers() == []


def test_every_system_check_id_names_exactly_one_check() -> None:
    """A stable id is documented and searched for: two checks never share one."""
    import re
    from collections import Counter
    from pathlib import Path

    root = Path(__file__).parents[2] / "apps"
    found = Counter(
        match
        for path in root.rglob("*.py")
        for match in re.findall(r'id="(mirror\.[EWI]\d{3})"', path.read_text())
    )
    assert found, "no system check ids found"
    assert [check_id for check_id, count in found.items() if count > 1] == []
    assert {"mirror.E001", "mirror.E101", "mirror.E102"} <= set(found)
