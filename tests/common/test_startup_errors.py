"""A bad configuration stops manage.py and the WSGI start with one line naming it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.child_env import child_environment

BASE_DIR = Path(settings.BASE_DIR)
SECRET = "s" * 60


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environ = child_environment(
        "DATABASE_URL", "MIGRATION_DATABASE_URL", "DJANGO_SECRET_KEY", "DEBUG"
    )
    environ.update(env)
    return subprocess.run(
        argv, cwd=BASE_DIR, env=environ, capture_output=True, text=True, timeout=60, check=False
    )


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    return run([sys.executable, "manage.py", *args], **env)


def wsgi(**env: str) -> subprocess.CompletedProcess[str]:
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    env.setdefault("ALLOWED_HOSTS", "mirror.example.com")
    return run([sys.executable, "-W", "ignore", "-c", "import config.wsgi"], **env)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("database_url", "named"),
    [
        ("mysql://u@127.0.0.1/x", "DATABASE_URL scheme 'mysql'"),
        ("postgres://u:hunter2@127.0.0.1:notaport/x", "DATABASE_URL"),
        ("postgres://u:hunter2@127.0.0.1:5432/", "names no database"),
        ("sqlite://host/db.sqlite3", "sqlite:///relative"),
    ],
)
def test_a_malformed_database_url_is_one_line(database_url, named):
    result = manage("check", DATABASE_URL=database_url)
    assert result.returncode != 0
    line = one_line(result)
    assert line.startswith("Countersign cannot start:")
    assert named in line
    assert "hunter2" not in result.stderr


def test_an_unreachable_postgres_is_one_line_naming_database_url():
    url = f"postgres://u:hunter2@127.0.0.1:{closed_port()}/x"
    result = manage("migrate", "--noinput", DATABASE_URL=url)
    assert result.returncode == 2
    line = one_line(result)
    assert "DATABASE_URL=postgres://u:***@127.0.0.1" in line
    assert "cannot connect" in line
    assert "hunter2" not in result.stderr


def test_an_unopenable_sqlite_file_names_its_path(tmp_path):
    path = tmp_path / "missing-folder" / "db.sqlite3"
    result = manage("migrate", "--noinput", DATABASE_URL=f"sqlite:///{path}")
    assert result.returncode == 2
    line = one_line(result)
    assert f"cannot open the SQLite file {path}" in line
    assert "DATABASE_URL=" in line


def test_a_value_that_does_not_parse_is_one_line_naming_the_variable():
    result = manage("check", DEBUG="maybe")
    assert result.returncode == 2
    assert "DEBUG='maybe' is not a boolean" in one_line(result)


def test_production_without_its_secret_is_one_line():
    result = manage("check", DJANGO_SETTINGS_MODULE="config.settings.production")
    assert result.returncode == 2
    assert "DJANGO_SECRET_KEY is required" in one_line(result)


def test_the_wsgi_start_without_its_secret_is_one_line():
    result = wsgi()
    assert result.returncode == 3
    assert "DJANGO_SECRET_KEY is required" in one_line(result)


def test_the_wsgi_start_with_an_unreachable_database_starts_and_says_so_in_one_line():
    """gunicorn halts when a worker fails to boot and recycles workers while serving: a
    database blip must not stop the server. The worker starts and answers 503 meanwhile."""
    url = f"postgres://u:hunter2@127.0.0.1:{closed_port()}/x"
    result = wsgi(DJANGO_SECRET_KEY=SECRET, DATABASE_URL=url)
    assert result.returncode == 0
    line = one_line(result)
    assert "DATABASE_URL=postgres://u:***@127.0.0.1" in line
    assert "answering 503" in line
    assert "hunter2" not in line


def test_the_wsgi_start_with_a_malformed_database_url_is_one_line():
    result = wsgi(DJANGO_SECRET_KEY=SECRET, DATABASE_URL="postgres://u@h:port/x")
    assert result.returncode == 3
    assert "DATABASE_URL" in one_line(result)


def test_a_good_configuration_starts(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    result = wsgi(DJANGO_SECRET_KEY=SECRET, DATABASE_URL=url)
    assert result.returncode == 0, result.stderr


@pytest.mark.postgres
def test_migrate_as_the_application_role_is_one_line_naming_migration_database_url():
    """The obvious mistake of a first production install: MIGRATION_DATABASE_URL unset, so
    migrate connects as the application role, which may not create tables in ``public``."""
    import psycopg
    from django.db import connection

    owner = settings.MIGRATION_DATABASE
    app = connection.settings_dict
    if not app["USER"] or app["USER"] == owner.get("USER"):
        pytest.skip("the suite connects as the tables' owner: no application role to try")
    name = f"mirror_migrate_probe_{os.getpid()}"
    admin = {"user": owner["USER"], "host": owner["HOST"], "port": owner["PORT"] or None}
    with psycopg.connect(dbname="postgres", autocommit=True, **admin) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        host = f"{app['HOST']}:{app['PORT']}" if app["PORT"] else app["HOST"]
        result = manage(
            "migrate", "--noinput", DATABASE_URL=f"postgres://{app['USER']}@{host}/{name}"
        )
        assert result.returncode == 2
        line = one_line(result)
        assert f"migrate connected as role {app['USER']!r}" in line
        assert "MIGRATION_DATABASE_URL" in line
        with psycopg.connect(dbname=name, **admin) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()
        assert tables == (0,), "nothing half-migrated"
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **admin) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
