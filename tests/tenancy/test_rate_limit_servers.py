"""Two gunicorn servers (two processes) behind one Redis count one org's requests in one
bucket: together they admit the burst and no more, and each answer's RateLimit-Remaining
continues the other's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/9"
BURST = 4


def _redis_reachable() -> bool:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
        return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(
    not _redis_reachable(), reason="needs Redis at 127.0.0.1:6379 (CI has it)"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _get(base: str, path: str, secret: str = "") -> tuple[int, dict[str, str]]:
    host, port = base.removeprefix("http://").split(":")
    connection = HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path, headers={"X-API-Key": secret} if secret else {})
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.getheaders())
    finally:
        connection.close()


def _wait_until_up(base: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"gunicorn exited with {server.returncode}")
        try:
            _get(base, "/healthz")
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{base} did not come up")


# The orgs and their keys, made through the services as the commands would (one process).
_SETUP = f"""
from apps.tenancy.models import Plan
from apps.tenancy.services import api_key_issue, org_create, org_set_limits
for slug in ("alternate", "rush"):
    org = org_create(slug=slug, name=slug, plan=Plan.FREE)
    org_set_limits(org=org, rate_per_minute=1, rate_burst={BURST})
    print("KEY", slug, api_key_issue(org=org, scopes=["policy:read"]).secret)
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], dict[str, str]]]:
    """Two single-worker gunicorn servers on one throwaway SQLite database and one Redis
    (under a key prefix of this run's own), and API keys of two orgs each limited to BURST
    at once and 1 a minute."""
    tmp_path = tmp_path_factory.mktemp("servers")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DEBUG": "false",
        "API_PROFILE": "keyscoped",
        "DATABASE_URL": f"sqlite:///{tmp_path}/mirror.sqlite3",
        "REDIS_URL": REDIS_URL,
        "CACHE_KEY_PREFIX": f"servers-{os.getpid()}-{time.time_ns()}",
        "RATE_LIMITS_ENABLED": "true",
        "GUNICORN_WORKERS": "1",
        "LOG_LEVEL": "WARNING",
    }
    env.pop("MIGRATION_DATABASE_URL", None)
    _manage(env, "migrate", "--noinput")
    printed = _manage(env, "shell", "-c", _SETUP).splitlines()
    secrets = dict(line.split()[1:] for line in printed if line.startswith("KEY "))
    ports = [_free_port(), _free_port()]
    started = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--workers",
                "1",
                "--bind",
                f"127.0.0.1:{port}",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for base, server in zip(bases, started, strict=True):
            _wait_until_up(base, server)
        yield bases, secrets
    finally:
        for server in started:
            server.terminate()
        for server in started:
            server.wait(timeout=30)


def test_two_servers_share_one_orgs_bucket(servers: tuple[list[str], dict[str, str]]) -> None:
    bases, secrets = servers
    # Alternating between the servers: each answer's Remaining follows the other server's.
    secret = secrets["alternate"]
    alternating = [_get(bases[n % 2], "/v1/policy/pull", secret) for n in range(BURST + 2)]
    assert [status for status, _ in alternating] == [200] * BURST + [429, 429]
    assert [headers["RateLimit-Remaining"] for _, headers in alternating] == [
        str(BURST - 1 - n) for n in range(BURST)
    ] + ["0", "0"]
    assert all(int(headers["Retry-After"]) >= 1 for _, headers in alternating[BURST:])


def test_two_servers_at_once_admit_the_burst_exactly(
    servers: tuple[list[str], dict[str, str]],
) -> None:
    bases, secrets = servers
    secret = secrets["rush"]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda n: _get(bases[n % 2], "/v1/policy/pull", secret), range(24)))
    statuses = [status for status, _ in answers]
    # Per-process counting would admit up to twice the burst.
    assert statuses.count(200) == BURST
    assert statuses.count(429) == 24 - BURST
