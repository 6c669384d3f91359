"""The README's first hour, on a copy of this checkout: `make run`, stopped, then `make test`.

Each test copies the project (as a fresh clone has it: no database, no demo secrets) and runs
the Makefile's own targets there on its own SQLite file, with this virtualenv standing in for
the one `make` would build (``-o`` keeps make from rebuilding it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.child_env import child_environment

# What a clone does not have (.gitignore) and what is not needed to run it.
NOT_IN_A_CLONE = (".git", ".venv", "*.sqlite3", "local-data", "staticfiles", "screenshots",
                  "__pycache__", "*.pyc", ".mypy_cache", ".ruff_cache", ".pytest_cache",
                  ".hypothesis", ".env")  # fmt: skip
# The settings a developer's shell may carry: the clone runs on its own defaults (SQLite).
DEVELOPER_ENVIRONMENT = ("DATABASE_URL", "MIGRATION_DATABASE_URL", "DJANGO_SETTINGS_MODULE",
                         "REDIS_URL", "API_PROFILE", "LOCAL_DATA_DIR", "DEBUG")  # fmt: skip


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    target = tmp_path / "countersign"
    shutil.copytree(
        settings.BASE_DIR, target, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE), symlinks=True
    )
    (target / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return target


def run_in(clone: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = child_environment(*DEVELOPER_ENVIRONMENT)
    return subprocess.run(
        command, cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def make(clone: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    return run_in(clone, "make", "--no-print-directory", "-o", ".venv/.installed", *targets)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_checks_pass_after_make_run_seeded_the_demo(clone: Path) -> None:
    # `make run`'s setup, without its server loop: migrate and the demo (which publishes
    # the log's first checkpoint under the development origin).
    seeded = run_in(
        clone,
        f"{sys.prefix}/bin/python",
        "manage.py",
        "bootstrap_demo",
        "--migrate",
        "--bind",
        f"127.0.0.1:{free_port()}",
    )
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    assert (clone / "db.sqlite3").exists()
    published = run_in(clone, f"{sys.prefix}/bin/python", "manage.py", "publish_checkpoint")
    assert published.returncode == 0, published.stdout + published.stderr

    checks = make(clone, "checks")

    output = checks.stdout + checks.stderr
    assert checks.returncode == 0, output
    assert "check --deploy" in output
    assert "System check identified" in output  # the deploy check ran to its end
    assert "mirror.E202" not in output


def test_make_run_refuses_a_port_with_a_listener_before_it_migrates(clone: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        run = make(clone, "run", f"HOST=127.0.0.1:{port}")

    assert run.returncode != 0
    assert f"127.0.0.1:{port} is not available (in use)" in run.stderr
    assert "Applying" not in run.stdout
    assert not (clone / "db.sqlite3").exists()  # nothing migrated, nothing written
