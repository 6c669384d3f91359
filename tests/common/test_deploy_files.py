"""The deploy files agree with the settings and with each other."""

from __future__ import annotations

import multiprocessing
import os
import re
import runpy
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from config.settings import base

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NGINX = (DEPLOY / "nginx.conf").read_text()
COMPOSE = (DEPLOY / "compose.yaml").read_text()
UNIT = (DEPLOY / "mirror.service").read_text()
DOCKERFILE = (DEPLOY / "Dockerfile").read_text()


def nginx_size(value: str) -> int:
    units = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", value.lower()).groups()  # type: ignore[union-attr]
    return int(number) * units[unit]


def nginx_seconds(directive: str) -> int:
    (value,) = re.findall(rf"^\s*{directive}\s+(\d+)s;", NGINX, re.M)
    return int(value)


def gunicorn_config(monkeypatch, **env: str) -> dict:
    for name in ("GUNICORN_WORKERS", "WEB_CONCURRENCY", "PROMETHEUS_MULTIPROC_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(DEPLOY / "gunicorn.conf.py"))


class TestNginx:
    def test_the_body_limit_matches_json_body_max_bytes(self):
        (limit,) = re.findall(r"client_max_body_size\s+(\w+);", NGINX)
        assert nginx_size(limit) == base.JSON_BODY_MAX_BYTES
        assert f"larger than {base.JSON_BODY_MAX_BYTES} bytes" in NGINX

    @pytest.mark.parametrize(
        "header",
        [
            "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
            "proxy_set_header X-Forwarded-Proto $scheme;",
            "proxy_set_header X-Request-ID $mirror_request_id;",
            "proxy_set_header Host $host;",
        ],
    )
    def test_it_forwards_what_the_service_reads(self, header):
        assert header in NGINX

    def test_a_client_request_id_passes_through_and_nginx_fills_in_a_missing_one(self):
        assert re.search(
            r"map \$http_x_request_id \$mirror_request_id \{\s*default \$http_x_request_id;"
            r'\s*""\s+\$request_id;',
            NGINX,
        )

    def test_tls_is_terminated_and_plain_http_redirected(self):
        assert "listen 443 ssl;" in NGINX
        assert "ssl_protocols TLSv1.2 TLSv1.3;" in NGINX
        assert "return 301 https://$host$request_uri;" in NGINX

    def test_metrics_are_not_served_through_the_proxy(self):
        assert re.search(r"location = /metrics \{\s*return 404;\s*\}", NGINX)

    def test_nginx_waits_longer_than_gunicorn(self, monkeypatch):
        timeout = gunicorn_config(monkeypatch)["timeout"]
        assert nginx_seconds("proxy_read_timeout") > timeout


class TestGunicorn:
    def test_each_worker_freezes_what_the_application_allocated_at_start(self, monkeypatch):
        import gc

        before = gc.get_freeze_count()
        try:
            gunicorn_config(monkeypatch)["post_worker_init"](object())
            assert gc.get_freeze_count() > before
        finally:
            gc.unfreeze()

    def test_sync_workers_one_per_core_by_default(self, monkeypatch):
        config = gunicorn_config(monkeypatch)
        assert config["worker_class"] == "sync"
        assert config["workers"] == multiprocessing.cpu_count()

    def test_gunicorn_workers_then_web_concurrency_set_the_count(self, monkeypatch):
        assert gunicorn_config(monkeypatch, WEB_CONCURRENCY="5")["workers"] == 5
        assert (
            gunicorn_config(monkeypatch, WEB_CONCURRENCY="5", GUNICORN_WORKERS="3")["workers"] == 3
        )

    def test_timeouts_nest_statement_then_worker_then_graceful(self, monkeypatch):
        config = gunicorn_config(monkeypatch)
        assert config["timeout"] > base.DB_STATEMENT_TIMEOUT_MS / 1000
        assert config["graceful_timeout"] < 30  # TimeoutStopSec and stop_grace_period

    def test_its_control_socket_is_off_unless_a_path_is_named(self, monkeypatch):
        assert gunicorn_config(monkeypatch)["control_socket_disable"] is True
        named = gunicorn_config(monkeypatch, GUNICORN_CONTROL_SOCKET="/run/mirror/gunicorn.ctl")
        assert named["control_socket_disable"] is False
        assert named["control_socket"] == "/run/mirror/gunicorn.ctl"

    def test_two_instances_on_one_host_claim_no_shared_socket_path(self, tmp_path):
        """Started with the deploy config and a HOME of its own, gunicorn creates nothing
        under it (gunicorn's default would be $HOME/.gunicorn/gunicorn.ctl)."""
        from tests.tenancy.test_rate_limit_servers import _free_port, _wait_until_up

        port = _free_port()
        env = {
            **os.environ,
            "HOME": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DEBUG": "false",
            "DATABASE_URL": f"sqlite:///{tmp_path}/mirror.sqlite3",
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "GUNICORN_WORKERS": "1",
            "LOG_LEVEL": "WARNING",
        }
        env.pop("XDG_RUNTIME_DIR", None)
        env.pop("MIGRATION_DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(DEPLOY / "gunicorn.conf.py"),
             "config.wsgi:application"],
            cwd=DEPLOY.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_until_up(f"http://127.0.0.1:{port}", server)
        finally:
            server.terminate()
            server.wait(timeout=30)
        assert not (tmp_path / ".gunicorn").exists()

    def test_its_own_access_log_is_json_and_off_by_default(self, monkeypatch):
        import json

        config = gunicorn_config(monkeypatch)
        assert config["accesslog"] is None
        sample = config["access_log_format"] % {
            "h": "127.0.0.1",
            "m": "GET",
            "U": "/healthz",
            "s": "200",
            "B": "15",
            "M": "1",
            "{x-request-id}o": "abc",
        }
        assert json.loads(sample)["request_id"] == "abc"
        assert config["logconfig_dict"]["formatters"]["json"]["()"] == (
            "apps.common.json_logging.JsonFormatter"
        )

    @pytest.mark.parametrize(("destination", "lines"), [(None, 0), ("-", 1)])
    def test_the_access_log_writes_only_when_a_destination_is_named(
        self, monkeypatch, destination, lines
    ):
        """gunicorn turns its access log on whenever logconfig_dict is set: the logger
        class keeps it to GUNICORN_ACCESSLOG."""
        from gunicorn.config import Config

        config = gunicorn_config(monkeypatch)
        settings = Config()
        for name in ("logconfig_dict", "access_log_format", "logger_class"):
            settings.set(name, config[name])
        settings.set("accesslog", destination)
        logger = config["logger_class"](settings)
        written: list[str] = []
        monkeypatch.setattr(logger.access_log, "info", lambda *args: written.append(args))
        response = type("Response", (), {"status": "200 OK", "headers": [], "sent": 15})()
        request = type(
            "Request", (), {"headers": [], "method": "GET", "path": "/healthz", "query": ""}
        )()
        environ = {
            "REMOTE_ADDR": "127.0.0.1",
            "REQUEST_METHOD": "GET",
            "RAW_URI": "/healthz",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        logger.access(response, request, environ, timedelta(milliseconds=1))
        assert logger.access_log_enabled is bool(destination)
        assert len(written) == lines

    def test_the_multiprocess_directory_is_emptied_at_start_of_metric_files_only(
        self, monkeypatch, tmp_path
    ):
        (tmp_path / "counter_1.db").write_bytes(b"")
        (tmp_path / "keep.txt").write_text("not ours")
        config = gunicorn_config(monkeypatch, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
        config["on_starting"](None)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]

    def test_an_exited_worker_is_marked_dead(self, monkeypatch, tmp_path):
        (tmp_path / "gauge_livesum_4242.db").write_bytes(b"")
        config = gunicorn_config(monkeypatch, PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
        config["child_exit"](None, type("Worker", (), {"pid": 4242})())
        assert not (tmp_path / "gauge_livesum_4242.db").exists()


class TestCompose:
    def test_the_mirror_is_healthy_when_readyz_answers(self):
        assert 'test: ["CMD", "python", "deploy/healthcheck.py"]' in COMPOSE
        assert '"/readyz"' in (DEPLOY / "healthcheck.py").read_text()

    def test_it_runs_postgresql_and_redis_and_waits_for_both(self):
        assert "image: postgres:" in COMPOSE
        assert "image: redis:" in COMPOSE
        assert "postgres: {condition: service_healthy}" in COMPOSE
        assert "redis: {condition: service_healthy}" in COMPOSE

    def test_several_workers_get_the_shared_cache(self):
        (redis_url,) = re.findall(r"REDIS_URL: (\S+)", COMPOSE)
        assert urlsplit(redis_url).hostname == "redis"
        assert re.search(r"GUNICORN_WORKERS: \$\{GUNICORN_WORKERS:-\d+\}", COMPOSE)

    def test_metrics_across_workers_have_a_directory(self):
        assert "PROMETHEUS_MULTIPROC_DIR:" in COMPOSE


class TestStartup:
    def test_migrations_run_without_the_statement_timeout(self):
        assert "DB_STATEMENT_TIMEOUT_MS=0 /opt/mirror/.venv/bin/python manage.py migrate" in UNIT
        assert "DB_STATEMENT_TIMEOUT_MS=0 python manage.py migrate" in DOCKERFILE

    def test_the_unit_gives_the_multiprocess_directory_a_writable_home(self):
        assert "RuntimeDirectory=mirror" in UNIT
        assert "Environment=PROMETHEUS_MULTIPROC_DIR=/run/mirror/prometheus" in UNIT


@pytest.mark.django_db(transaction=True)
def test_the_container_healthcheck_passes_against_a_ready_service(live_server, monkeypatch):
    healthcheck = runpy.run_path(str(DEPLOY / "healthcheck.py"))
    port = urlsplit(live_server.url).port
    monkeypatch.setenv("GUNICORN_BIND", f"0.0.0.0:{port}")
    monkeypatch.setenv("ALLOWED_HOSTS", ".localhost,mirror.example.com")
    assert healthcheck["allowed_host"]() == "localhost"
    assert healthcheck["main"]() == 0
    monkeypatch.setenv("GUNICORN_BIND", "127.0.0.1:1")
    assert healthcheck["main"]() == 1


def test_the_transparency_log_epochs_run_on_the_worker() -> None:
    from apps.common.scheduling import schedule

    worker = (DEPLOY / "mirror-worker.service").read_text()
    assert "manage.py run_worker" in worker
    assert "EnvironmentFile=/etc/mirror/env" in worker
    assert '"run_worker"' in COMPOSE
    assert COMPOSE.count("TRANSPARENCY_ORIGIN: ${TRANSPARENCY_ORIGIN:?") == 2  # web and worker
    names = [scheduled.name for scheduled in schedule()]
    assert "publish_transparency_epoch" in names
