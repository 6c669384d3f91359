"""The production install works as documented: docs/production.md's commands run as written,
and deploy/compose.yaml's services, replayed natively, connect as the application role.

Both run against the local PostgreSQL (a fresh database and roles of their own, dropped
afterwards) and Redis, start the web and worker services, and then push a receipt and pull
the policy as an agent would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from django.conf import settings

from tests.child_env import child_environment
from tests.receipts.factories import Agent, as_text

ROOT = Path(settings.BASE_DIR)
GUIDE = ROOT / "docs" / "production.md"
COMPOSE = ROOT / "deploy" / "compose.yaml"
SHIM = Path(__file__).with_name("systemctl_shim.py")

pytestmark = [pytest.mark.postgres]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def superuser() -> dict[str, Any]:
    owner = settings.MIGRATION_DATABASE
    return {"user": owner["USER"], "host": owner["HOST"] or None, "port": owner["PORT"] or None}


def sh_blocks(markdown: str) -> list[str]:
    """The guide's ```sh blocks, in order (``bash`` blocks are machine setup, not run)."""
    return re.findall(r"^```sh\n(.*?)^```", markdown, re.M | re.S)


def clean_environment() -> dict[str, str]:
    """This process's environment without the suite's database and Django settings."""
    return child_environment(
        "DATABASE_URL", "MIGRATION_DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PGDATABASE"
    )


@pytest.fixture
def fresh_names() -> Iterator[dict[str, str]]:
    """A database and two roles no other test uses; dropped afterwards, whatever happened."""
    suffix = f"{os.getpid()}_{time.monotonic_ns() % 100000}"
    names = {"db": f"install_{suffix}", "owner": f"install_owner_{suffix}",
             "app": f"install_app_{suffix}"}  # fmt: skip
    yield names
    with psycopg.connect(dbname="postgres", autocommit=True, **superuser()) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {names['db']} WITH (FORCE)")
        for role in (names["owner"], names["app"]):
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def http(method: str, url: str, *, host: str, body: Any = None, key: str | None = None) -> Any:
    headers = {"Host": host, "X-Forwarded-Proto": "https", "Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (loopback)
        return answer.status, json.loads(answer.read())


def wait_ready(port: int, host: str, processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/readyz", headers={"Host": host}
            )
            with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        assert all(process.poll() is None for process in processes), "a service exited"
        time.sleep(0.5)
    raise AssertionError("the service did not become ready")


def agent_round_trip(port: int, host: str, key: str) -> None:
    """What an agent does first: push a signed receipt, pull the policy."""
    receipt = json.loads(as_text(Agent().receipt()))
    status, answer = http(
        "POST", f"http://127.0.0.1:{port}/v1/receipts", host=host, body={"receipt": receipt},
        key=key,
    )  # fmt: skip
    assert (status, answer["status"]) == (201, "appended")
    status, policy = http("GET", f"http://127.0.0.1:{port}/v1/policy/pull", host=host, key=key)
    assert status == 200
    assert policy["policy_id"].startswith("pol_")


def stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 30
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.2)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def test_the_production_guide_runs_as_written(tmp_path, fresh_names):
    blocks = sh_blocks(GUIDE.read_text())
    assert len(blocks) >= 7, "the guide's commands are fenced as sh"
    shim_bin = tmp_path / "bin"
    shim_bin.mkdir()
    (shim_bin / "systemctl").write_text(f'#!/bin/sh\nexec {sys.executable} {SHIM} "$@"\n')
    (shim_bin / "systemctl").chmod(0o755)
    for folder in ("etc", "data", "systemd", "logs"):
        (tmp_path / folder).mkdir()
    port, host = free_port(), "mirror.install.test"
    admin = superuser()
    env = clean_environment()
    env.update(
        PATH=f"{shim_bin}:{env['PATH']}",
        MIRROR_HOME=str(ROOT),
        MIRROR_ETC=str(tmp_path / "etc"),
        MIRROR_DATA=str(tmp_path / "data"),
        SYSTEMD_DIR=str(tmp_path / "systemd"),
        MIRROR_HOST=host,
        MIRROR_PORT=str(port),
        MIRROR_DB=fresh_names["db"],
        MIRROR_OWNER=fresh_names["owner"],
        MIRROR_APP=fresh_names["app"],
        PGHOST=admin["host"] or "127.0.0.1",
        PGPORT=str(admin["port"] or 5432),
        PGUSER=admin["user"],
        SHIM_PIDS=str(tmp_path / "pids"),
        SHIM_LOGS=str(tmp_path / "logs"),
    )
    epilogue = f'\nprintf "%s" "$API_KEY" > {shlex.quote(str(tmp_path / "api_key"))}\n'
    script = "set -euo pipefail\n" + "\n".join(blocks) + epilogue
    pids: list[int] = []
    try:
        done = subprocess.run(
            ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=600,
            check=False,
        )  # fmt: skip
        if (tmp_path / "pids").exists():
            pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
        logs = "\n".join(p.read_text() for p in (tmp_path / "logs").glob("*.log"))
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{logs}"
        assert len(pids) == 2, "the web and the worker service were started"
        env_file = (tmp_path / "etc" / "env").read_text()
        assert oct((tmp_path / "etc" / "env").stat().st_mode & 0o777) == "0o600"
        assert f"DATABASE_URL=postgres://{fresh_names['app']}:" in env_file
        agent_round_trip(port, host, (tmp_path / "api_key").read_text())
        for pid in pids:
            os.kill(pid, 0)  # both services still run
    finally:
        stop(pids)


# -- deploy/compose.yaml --------------------------------------------------------------------

COMPOSE_VALUES = {
    "DJANGO_SECRET_KEY": "compose-" + "k" * 50,
    "ALLOWED_HOSTS": "mirror.compose.test",
    "TRANSPARENCY_ORIGIN": "mirror.compose.test/v1/log",
    "POSTGRES_PASSWORD": "superuser-pw",
    "MIRROR_OWNER_PASSWORD": "owner-pw",
    "MIRROR_APP_PASSWORD": "app-pw",
}


def interpolate(value: str, values: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}``."""

    def one(match: re.Match[str]) -> str:
        name, operator, word = match.group(1), match.group(2), match.group(3)
        if name in values:
            return values[name]
        if operator == ":-":
            return word
        raise AssertionError(f"compose requires {name}: {word}")

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def compose_services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())["services"]
    for service in services.values():
        service["environment"] = {
            name: interpolate(str(value), COMPOSE_VALUES)
            for name, value in service.get("environment", {}).items()
        }
    return services


def test_compose_connects_the_service_as_the_application_role_not_the_images_superuser():
    services = compose_services()
    postgres = services["postgres"]["environment"]
    superuser_name = postgres["POSTGRES_USER"]
    for name in ("mirror", "worker"):
        environment = services[name]["environment"]
        app_user = re.match(r"postgres://([^:]+):", environment["DATABASE_URL"]).group(1)  # type: ignore[union-attr]
        assert app_user == postgres["MIRROR_APP"] != superuser_name
    owner_url = services["mirror"]["environment"]["MIGRATION_DATABASE_URL"]
    assert owner_url.startswith(f"postgres://{postgres['MIRROR_OWNER']}:")
    assert "MIGRATION_DATABASE_URL" not in services["worker"]["environment"]
    volumes = services["postgres"]["volumes"]
    assert "./compose/postgres-init.sh:/docker-entrypoint-initdb.d/10-mirror-roles.sh:ro" in volumes
    assert "./postgres-roles.sql:/deploy/postgres-roles.sql:ro" in volumes


def test_compose_refuses_to_start_without_its_secrets():
    text = COMPOSE.read_text()
    for name in ("DJANGO_SECRET_KEY", "POSTGRES_PASSWORD", "MIRROR_OWNER_PASSWORD",
                 "MIRROR_APP_PASSWORD", "TRANSPARENCY_ORIGIN"):  # fmt: skip
        assert f"${{{name}:?" in text


def test_compose_replayed_natively_migrates_serves_and_works(tmp_path, fresh_names):
    """The postgres service's init script, then the mirror's and the worker's commands, as
    the containers would run them, against the local PostgreSQL and Redis: only the host
    names (``postgres``, ``redis``), the role and database names and the port differ."""
    services = compose_services()
    admin = superuser()
    pg_host, pg_port = admin["host"] or "127.0.0.1", str(admin["port"] or 5432)

    def local(value: str) -> str:
        value = value.replace("@postgres:5432/mirror", f"@{pg_host}:{pg_port}/{fresh_names['db']}")
        value = value.replace("postgres://mirror_app:", f"postgres://{fresh_names['app']}:")
        value = value.replace("postgres://mirror_owner:", f"postgres://{fresh_names['owner']}:")
        return value.replace("redis://redis:", "redis://127.0.0.1:")

    # The postgres container's first start: deploy/compose/postgres-init.sh.
    init_env = clean_environment()
    init_env.update(services["postgres"]["environment"])
    init_env.update(
        MIRROR_DB=fresh_names["db"], MIRROR_OWNER=fresh_names["owner"],
        MIRROR_APP=fresh_names["app"], POSTGRES_USER=admin["user"], PGHOST=pg_host,
        PGPORT=pg_port,
    )  # fmt: skip
    script = (ROOT / "deploy" / "compose" / "postgres-init.sh").read_text()
    script = script.replace("/deploy/postgres-roles.sql", str(ROOT / "deploy/postgres-roles.sql"))
    done = subprocess.run(["sh", "-c", script], env=init_env, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr

    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    (cmd,) = re.findall(r"^CMD (\[.*\])$", dockerfile, re.M)
    image_env = dict(re.findall(r"(\w+)=(\S+)", dockerfile.split("ENV", 1)[1].split("RUN")[0]))
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    logs = tmp_path / "compose.log"
    try:
        for name, command in (("mirror", json.loads(cmd)), ("worker", None)):
            env = clean_environment()
            env.update(image_env)
            env.update({key: local(value) for key, value in services[name]["environment"].items()})
            # The image's `python` and `gunicorn` are its installed requirements': this venv's.
            env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
            env["GUNICORN_BIND"] = f"127.0.0.1:{port}"
            env["MEDIA_ROOT"] = str(tmp_path / "media")
            env["CACHE_KEY_PREFIX"] = fresh_names["db"]
            argv = command or services[name]["command"]
            processes.append(subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=logs.open("ab"), stderr=subprocess.STDOUT,
                start_new_session=True,
            ))  # fmt: skip
            if name == "mirror":
                try:
                    wait_ready(port, "mirror.compose.test", processes)
                except AssertionError:
                    raise AssertionError(logs.read_text()) from None
        # The first org and key, as an operator would in the mirror container.
        setup = (
            "from apps.tenancy.services import api_key_issue, org_create\n"
            "from apps.policy.services import policy_deploy\n"
            "org = org_create(slug='compose', plan='team')\n"
            "policy_deploy(org=org, toml=open('deploy/examples/policy.toml').read())\n"
            "print(api_key_issue(org=org, scopes=['receipts:write', 'policy:read']).secret)\n"
        )
        owner_env = clean_environment()
        owner_env.update(image_env)
        owner_env.update({k: local(v) for k, v in services["mirror"]["environment"].items()})
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "--no-imports", "-c", setup], cwd=ROOT,
            env=owner_env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        agent_round_trip(port, "mirror.compose.test", done.stdout.split()[-1])
        assert all(process.poll() is None for process in processes), logs.read_text()
    finally:
        stop([process.pid for process in processes])
