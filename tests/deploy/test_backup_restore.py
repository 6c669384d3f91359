"""Backups that restore: pg_dump / pg_restore, the restore drill (``restore_check``), and a
restore to an earlier point recovered by the agents' re-pushes, with the log's rollback
reported by the monitor, never silently. docs/production.md §12 documents the commands.

Everything runs as an operator would: the production settings, gunicorn, PostgreSQL's own
tools, against a fresh database and roles of the test's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from tests.deploy.test_production_install import (
    ROOT,
    clean_environment,
    free_port,
    http,
    superuser,
    wait_ready,
)
from tests.receipts.factories import Agent, as_text

pytestmark = [pytest.mark.postgres]

Done = subprocess.CompletedProcess[str]
SDK = ROOT / "tests" / "data" / "sdk"
HOST = "mirror.backup.test"
ORIGIN = f"{HOST}/v1/log"


@pytest.fixture
def names():
    suffix = f"{os.getpid()}_{time.monotonic_ns() % 100000}"
    found = {"db": f"backup_{suffix}", "restored": f"backup_{suffix}_restored",
             "owner": f"backup_owner_{suffix}", "app": f"backup_app_{suffix}"}  # fmt: skip
    yield found
    with psycopg.connect(dbname="postgres", autocommit=True, **superuser()) as conn:
        for database in (found["db"], found["restored"]):
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        for role in (found["owner"], found["app"]):
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def receipts_in_ledger_order() -> list[dict]:
    """What one agent's local ledger holds: two real SDK sessions, then a chained session."""
    ledger = []
    for name in ("session_interop.jsonl", "session_demo.jsonl"):
        ledger += [json.loads(line) for line in (SDK / name).read_text().splitlines() if line]
    ledger += [json.loads(as_text(r)) for r in Agent().session("backup-session", 8)]
    return ledger


class Operator:
    def __init__(self, names: dict[str, str], tmp_path: Path) -> None:
        admin = superuser()
        self.pg = {"PGHOST": admin["host"] or "127.0.0.1", "PGPORT": str(admin["port"] or 5432),
                   "PGUSER": admin["user"]}  # fmt: skip
        self.names = names
        self.tmp = tmp_path
        self.port = free_port()
        self.web: subprocess.Popen[bytes] | None = None

    def env(self, database: str) -> dict[str, str]:
        host = f"{self.pg['PGHOST']}:{self.pg['PGPORT']}"
        env = clean_environment()
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings.production",
            DJANGO_SECRET_KEY="backup-" + "s" * 50,
            ALLOWED_HOSTS=f"{HOST},127.0.0.1",  # the monitor asks by address
            DATABASE_URL=f"postgres://{self.names['app']}@{host}/{database}",
            MIGRATION_DATABASE_URL=f"postgres://{self.names['owner']}@{host}/{database}",
            TRANSPARENCY_ORIGIN=ORIGIN,
            TRANSPARENCY_EPOCH_SECONDS="0",
            GUNICORN_BIND=f"127.0.0.1:{self.port}",
            GUNICORN_WORKERS="1",
            SECURE_SSL_REDIRECT="false",
        )
        return env

    def run(
        self, argv: list[str], database: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env(database), **self.pg}
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        if check:
            assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
        return done

    def manage(
        self, *args: str, database: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.run([sys.executable, "manage.py", *args], database, check)

    def serve(self, database: str) -> None:
        self.stop()
        self.web = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "-c",
             "deploy/gunicorn.conf.py"], cwd=ROOT, env=self.env(database),
            stdout=(self.tmp / "web.log").open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_ready(self.port, HOST, [self.web])

    def stop(self) -> None:
        if self.web is not None and self.web.poll() is None:
            self.web.send_signal(signal.SIGTERM)
            self.web.wait(timeout=30)

    def push(self, key: str, receipt: dict) -> dict:
        status, answer = http("POST", f"http://127.0.0.1:{self.port}/v1/receipts", host=HOST,
                              body={"receipt": receipt}, key=key)  # fmt: skip
        assert status in (200, 201), answer
        return answer

    def checkpoint_note(self, path: Path) -> Path:
        import urllib.request

        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/log/checkpoint",
            headers={"Host": HOST, "X-Forwarded-Proto": "https"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            path.write_bytes(answer.read())
        return path


def test_a_backup_restores_verifies_and_an_earlier_restore_is_refilled_by_re_pushes(
    tmp_path, names
):
    op = Operator(names, tmp_path)
    db, restored = names["db"], names["restored"]
    op.run(["psql", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-v", f"db={db}",
            "-v", f"owner={names['owner']}", "-v", f"app={names['app']}",
            "-v", "owner_password=x", "-v", "app_password=y",
            "-f", str(ROOT / "deploy" / "postgres-roles.sql")], db)  # fmt: skip
    op.manage("migrate", "--noinput", database=db)
    setup = (
        "from apps.tenancy.services import api_key_issue, org_create\n"
        "org = org_create(slug='backup', plan='team')\n"
        "print(api_key_issue(org=org, scopes=['receipts:write', 'policy:read']).secret)\n"
    )
    key = op.manage("shell", "--no-imports", "-c", setup, database=db).stdout.split()[-1]
    ledger = receipts_in_ledger_order()
    before, after = ledger[:8], ledger[8:]
    try:
        op.serve(db)
        first_seqs = [op.push(key, receipt)["seq"] for receipt in before]
        op.manage("publish_checkpoint", database=db)
        published_before = op.checkpoint_note(tmp_path / "before.checkpoint")
        # The backup: a consistent snapshot, as the tables' owner (docs/production.md §12).
        dump = tmp_path / "mirror.dump"
        op.run(["pg_dump", "--format=custom", f"--file={dump}", "--dbname",
                op.env(db)["MIGRATION_DATABASE_URL"]], db)  # fmt: skip
        for receipt in after:
            assert op.push(key, receipt)["status"] == "appended"
        op.manage("publish_checkpoint", database=db)
        published_after = op.checkpoint_note(tmp_path / "after.checkpoint")
        monitor = ["monitor_log", "--log", f"http://127.0.0.1:{op.port}", "--origin", ORIGIN,
                   "--state-file", str(tmp_path / "monitor.state"), "--no-events"]  # fmt: skip
        assert op.manage(*monitor, database=db, check=False).returncode == 0
        op.stop()

        # The restore, into a new database: the restore drill passes against the checkpoint
        # saved with the dump, and calls the one published after it a rollback.
        op.run(["createdb", "--owner", names["owner"], restored], db)
        op.run(["pg_restore", "--exit-on-error", "--dbname", restored, str(dump)], db)
        drill = op.manage("restore_check", "--published", str(published_before),
                          database=restored, check=False)  # fmt: skip
        assert drill.returncode == 0, drill.stdout + drill.stderr
        report = json.loads(drill.stdout)
        assert report["orgs"] == [{"org": "backup", "size": 8, "ok": True}]
        assert report["log"]["checkpoints_checked"] >= 1
        later = op.manage("restore_check", "--published", str(published_after),
                          database=restored, check=False)  # fmt: skip
        assert later.returncode == 2
        assert "rollback" in json.loads(later.stdout)["alerts"][0]

        # The restored service serves an older checkpoint: the monitor that saw the newer
        # one calls it a rollback (an alert, exit 2), never silently.
        op.serve(restored)
        rolled_back = op.manage(*monitor, database=restored, check=False)
        assert rolled_back.returncode == 2
        assert "rollback" in rolled_back.stderr

        # The agent re-pushes its ledger: what the restore kept answers duplicate with its
        # original seq, what it lost is appended again, in order, and the chain verifies.
        answers = [op.push(key, receipt) for receipt in ledger]
        assert [a["status"] for a in answers[:8]] == ["duplicate"] * 8
        assert [a["seq"] for a in answers[:8]] == first_seqs
        assert [a["status"] for a in answers[8:]] == ["appended"] * len(after)
        assert [a["seq"] for a in answers[8:]] == list(range(9, len(ledger) + 1))
        assert op.manage("verify_chain", "backup", database=restored).returncode == 0

        # Re-pushed in ledger order, the mirror is the same chain again, so the next epoch
        # republishes exactly the checkpoint the monitor had verified: the log is whole.
        op.manage("publish_checkpoint", database=restored)
        healed = op.manage(*monitor, database=restored, check=False)
        assert healed.returncode == 0, healed.stderr
        republished = op.checkpoint_note(tmp_path / "republished.checkpoint")
        assert (
            republished.read_text().split("\n\n")[0]
            == (published_after.read_text().split("\n\n")[0])
        )
    finally:
        op.stop()
