#!/usr/bin/env python
"""Failover drill: the primary PostgreSQL is killed under SDK-shaped load; nothing
acknowledged may be lost, and the service must recover by itself.

It starts, on the loopback address:
  * etcd and two Patroni-managed PostgreSQL nodes (``deploy/ha/cluster.py``, running the
    shipped ``deploy/ha/patroni.yml``): a primary and a synchronous standby;
  * two deployments, each in its own database of that cluster and each reaching the
    primary through libpq's multi-host ``DATABASE_URL`` (no proxy): gunicorn serving the
    key-scoped profile with its task worker, and gunicorn serving the team-path profile;
then sends, from several clients at once, key-scoped single pushes, team-path batches and
approval votes (tokens signed with the approvers' own keys), each client retrying what was
not acknowledged as the SDK re-pushes its ledger. Mid-run it SIGKILLs the primary's
postmaster; Patroni fails over to the standby, then brings the old primary back as a
standby. Afterwards it checks:
  * every receipt answered 201 / ``duplicate`` / ``accepted`` is in its org's chain, and
    ``verify_chain`` passes for every org (seq gapless, chain hashes, every receipt);
  * every vote answered 200 is recorded;
  * no request answered 500, every unavailable answer was 503 with ``Retry-After``;
  * the transparency log stayed consistent across the failover (``monitor_log``) and
    acknowledged receipts' inclusion proofs verify (``verify_transparency``);
  * the web and task workers were never restarted, and periodic work resumed (a new
    checkpoint was published after the failover);
and prints the unavailability window: from the first failed request to the first
request that succeeded after it.

    python deploy/ha/failover_drill.py [--seconds 20] [--runs 1]

Load goes only to 127.0.0.1, and every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from deploy.ha.cluster import Cluster, free_port, missing_tools, new_cluster  # noqa: E402

PY = sys.executable
APP_PASSWORD = "ha-app"  # noqa: S105 (a throwaway loopback cluster)
OWNER_PASSWORD = "ha-owner"  # noqa: S105
ORIGIN = "ha-drill.example/v1/log"

# -- the deployments --------------------------------------------------------------------------


@dataclass
class Deployment:
    profile: str
    database: str
    port: int
    env: dict[str, str]
    root: Path
    web: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None

    @property
    def web_log(self) -> Path:
        return self.root / f"{self.profile}-web.log"

    @property
    def worker_log(self) -> Path:
        return self.root / f"{self.profile}-worker.log"

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def start(self, *, with_worker: bool) -> None:
        self.web = subprocess.Popen(
            [PY, "-m", "gunicorn", "config.wsgi:application", "-c", "deploy/gunicorn.conf.py"],
            cwd=ROOT,
            env=self.env,
            stdout=self.web_log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        if with_worker:
            self.worker = subprocess.Popen(
                [PY, "manage.py", "run_worker"],
                cwd=ROOT,
                env=self.env,
                stdout=self.worker_log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if request(self.port, "GET", "/healthz")[0] == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.profile}: gunicorn did not become ready")

    def worker_pids(self) -> list[int]:
        if self.web is None:
            return []
        children = Path(f"/proc/{self.web.pid}/task/{self.web.pid}/children").read_text()
        return sorted(int(pid) for pid in children.split())

    def stop(self) -> None:
        for process in (self.worker, self.web):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in (self.worker, self.web):
            if process is not None:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def deployment_env(cluster: Cluster, profile: str, database: str, port: int) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "DATABASE_URL",
            "MIGRATION_DATABASE_URL",
            "DJANGO_SETTINGS_MODULE",
            "DJANGO_ALLOW_ASYNC_UNSAFE",
        )
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="ha-drill-" + secrets.token_urlsafe(50),
        API_PROFILE=profile,
        DATABASE_URL=cluster.url("mirror_app", APP_PASSWORD, database),
        MIGRATION_DATABASE_URL=cluster.url("mirror_owner", OWNER_PASSWORD, database),
        # A connection attempt to a dead node fails at once (connection refused); one that
        # hangs (a host gone from the network) gives up after this and libpq tries the next.
        DB_CONNECT_TIMEOUT_SECONDS="3",
        REDIS_URL=os.environ.get("HA_DRILL_REDIS_URL", "redis://127.0.0.1:6379/0"),
        CACHE_KEY_PREFIX=f"ha-drill-{database}-{secrets.token_hex(4)}",
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="false",
        SECURE_HSTS_SECONDS="0",
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS="2",
        GUNICORN_ACCESSLOG="",
        TRANSPARENCY_ORIGIN=ORIGIN,
        TRANSPARENCY_EPOCH_SECONDS="2",
        RECEIPT_CAP_CUSTOM="100000000",
        RATE_CUSTOM_PER_MINUTE="100000000",
        RATE_CUSTOM_BURST="100000",
        PUBLIC_BASE_URL=f"http://127.0.0.1:{port}",
        LOG_LEVEL="WARNING",
    )
    return env


ROLES_SQL = [
    f"CREATE ROLE mirror_owner LOGIN PASSWORD '{OWNER_PASSWORD}'",
    f"CREATE ROLE mirror_app LOGIN PASSWORD '{APP_PASSWORD}' "
    "NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE",
]


def create_databases(cluster: Cluster, names: list[str]) -> None:
    """deploy/postgres-roles.sql's roles and databases, on the cluster's primary."""
    import psycopg

    with psycopg.connect(cluster.superuser_url(), autocommit=True) as conn:
        for statement in ROLES_SQL:
            conn.execute(statement)
        for name in names:
            conn.execute(f"CREATE DATABASE {name} OWNER mirror_owner")
    for name in names:
        with psycopg.connect(cluster.superuser_url(name), autocommit=True) as conn:
            conn.execute("ALTER SCHEMA public OWNER TO mirror_owner")
            conn.execute("GRANT USAGE ON SCHEMA public TO mirror_app")


# -- HTTP -------------------------------------------------------------------------------------


def request(
    port: int, method: str, path: str, body: Any = None, key: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: (status, headers, body); status 0 when the
    connection failed or closed without an answer."""
    data = b"" if body is None else json.dumps(body).encode()
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if key:
        head.append(f"Authorization: Bearer {key}")
    if data:
        head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    raw = ("\r\n".join(head) + "\r\n\r\n").encode() + data
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(raw)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:
        return 0, {}, b""
    response = b"".join(chunks)
    if not response:
        return 0, {}, b""
    header_block, _, payload = response.partition(b"\r\n\r\n")
    lines = header_block.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ", 2)[1]), headers, payload


# -- the load ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the clients saw, shared by every client thread."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: dict[str, dict[int, int]] = field(default_factory=dict)
    # (monotonic start of the request, ok?)
    timeline: list[tuple[float, bool]] = field(default_factory=list)
    unavailable_without_retry_after: int = 0
    acknowledged: dict[str, set[str]] = field(default_factory=dict)  # database -> action hashes
    votes: list[str] = field(default_factory=list)  # action hashes whose vote was acknowledged
    # Votes whose retry was refused as a replay, found counted by reading the approval.
    reconciled: int = 0
    unfinished: int = 0

    def record(self, kind: str, started: float, status: int, headers: dict[str, str]) -> None:
        with self.lock:
            counts = self.statuses.setdefault(kind, {})
            counts[status] = counts.get(status, 0) + 1
            self.timeline.append((started, 200 <= status < 300))
            if status == 503 and "retry-after" not in headers:
                self.unavailable_without_retry_after += 1


def keep_trying(
    outcome: Outcome, kind: str, deadline: float, send: Any, accept: Any,
    reconcile: Any = None,
) -> bool:  # fmt: skip
    """Send until acknowledged (2xx, checked by ``accept``) or the deadline: the SDK
    re-pushes what its ledger holds unacknowledged, and a voter presses again.

    A retry whose earlier attempt failed without an answer may find that attempt committed:
    a vote's token is then refused as replayed (a nonce is never accepted twice). The client
    reconciles as a person would, by reading the approval (``reconcile``)."""
    failed_before = False
    while time.monotonic() < deadline:
        started = time.monotonic()
        status, headers, body = send()
        outcome.record(kind, started, status, headers)
        if 200 <= status < 300:
            accept(body)
            return True
        if failed_before and reconcile is not None and reconcile(status, body):
            with outcome.lock:
                outcome.reconciled += 1
            accept(None)
            return True
        if status not in (0, 502, 503):
            raise RuntimeError(f"{kind}: unexpected answer {status}: {body[:300]!r}")
        failed_before = True
        time.sleep(0.2)
    return False


def paced(count: int, seconds: float) -> Any:
    """Yield 0..count-1, spread evenly over ``seconds`` (a client that keeps pushing for the
    whole run, before, during and after the failover, rather than racing through its work)."""
    started = time.monotonic()
    for index in range(count):
        time.sleep(max(0.0, started + index * seconds / count - time.monotonic()))
        yield index


def ks_push_client(
    outcome: Outcome, port: int, key: str, texts: list[str], deadline: float, seconds: float
) -> None:
    acknowledged = outcome.acknowledged.setdefault("ks", set())
    for index in paced(len(texts), seconds):
        text = texts[index]
        body = json.loads('{"receipt":' + text + "}")

        def accept(payload: bytes, action_hash: str = body["receipt"]["content"]["action_hash"]):
            answer = json.loads(payload)
            assert answer["status"] in ("appended", "duplicate"), answer
            with outcome.lock:
                acknowledged.add(action_hash)

        if not keep_trying(
            outcome, "push", deadline,
            lambda body=body: request(port, "POST", "/v1/receipts", body, key), accept,
        ):  # fmt: skip
            with outcome.lock:
                outcome.unfinished += 1
            return


def tp_batch_client(
    outcome: Outcome, port: int, key: str, texts: list[str], size: int, deadline: float,
    seconds: float,
) -> None:  # fmt: skip
    acknowledged = outcome.acknowledged.setdefault("tp", set())
    batches = range(0, len(texts), size)
    for index in paced(len(batches), seconds):
        start = batches[index]
        receipts = [json.loads(text) for text in texts[start : start + size]]

        def accept(payload: bytes, receipts: list[dict[str, Any]] = receipts) -> None:
            results = json.loads(payload)
            for receipt, result in zip(receipts, results, strict=True):
                assert result["accepted"], result
                with outcome.lock:
                    acknowledged.add(receipt["content"]["action_hash"])

        if not keep_trying(
            outcome, "batch", deadline,
            lambda receipts=receipts: request(
                port, "POST", "/v1/receipts/batch", {"receipts": receipts}, key
            ),
            accept,
        ):  # fmt: skip
            with outcome.lock:
                outcome.unfinished += 1
            return


def vote_client(
    outcome: Outcome, port: int, key: str, votes: list[tuple[str, dict[str, Any], str]],
    deadline: float, pace: float,
) -> None:  # fmt: skip
    """Votes spread over the run (one every ``pace`` seconds), so some meet the failover."""
    for action_hash, content, token in votes:
        time.sleep(pace)
        body = {"token_b64": token, "action_content": content, "decision": "approved"}

        def accept(payload: bytes | None, action_hash: str = action_hash) -> None:
            with outcome.lock:
                outcome.votes.append(action_hash)

        def counted(status: int, payload: bytes, action_hash: str = action_hash) -> bool:
            if status != 403 or b"replayed" not in payload:
                return False
            answer = request(port, "GET", f"/v1/approvals/{action_hash}", None, key)
            return answer[0] == 200 and json.loads(answer[2])["status"] == "approved"

        path = f"/v1/approvals/{action_hash}/submit-token"
        if not keep_trying(
            outcome, "vote", deadline, lambda body=body, path=path: request(
                port, "POST", path, body, key), accept, counted,
        ):  # fmt: skip
            with outcome.lock:
                outcome.unfinished += 1
            return


def session_texts(count: int) -> list[str]:
    """``count`` signed receipts of one session, chained as the SDK chains them."""
    from tests.receipts.factories import Agent, as_text

    return [as_text(r) for r in Agent().session(f"ha-{secrets.token_hex(4)}", count)]


# -- setup ------------------------------------------------------------------------------------

SETUP_KS = """
from apps.approvals.services import approver_key_register
from apps.tenancy.services import api_key_issue, org_create
org = org_create(slug="ha-ks", plan="custom")
print(api_key_issue(org=org, scopes=["receipts:write", "approvals:write", "policy:read"]).secret)
approver_key_register(org=org, public_key="{public}", key_id="ha-approver")
"""

SETUP_TP = """
from apps.tenancy.services import api_key_issue, org_create
org = org_create(slug="ha-tp", plan="custom")
print(api_key_issue(org=org, scopes=["receipts:write", "approvals:write", "policy:read"]).secret)
"""


def open_approvals(port: int, key: str, count: int) -> list[tuple[str, dict[str, Any], str]]:
    """``count`` suspended actions pushed and opened as approvals (threshold 1), each with
    its vote token signed by the approver's own key."""
    from nacl.signing import SigningKey

    from apps.receipts.verifier import content_bytes
    from tests.approvals.signing import sign_approval_token
    from tests.receipts.factories import Agent

    approver = SigningKey(bytes.fromhex(os.environ["HA_DRILL_APPROVER_SEED"]))
    votes = []
    for _ in range(count):
        receipt = Agent().receipt(
            policy={
                "rule_id": "payments.review",
                "rule_display": "When any agent performs payment, then require approval.",
                "matched_conditions": [{"field": "verb", "op": "eq", "value": "payment"}],
                "decision_path": "require_approval",
            }
        )
        content = receipt["content"]
        status, _, body = request(port, "POST", "/v1/receipts", {"receipt": receipt}, key)
        assert status == 201, body
        opened = {"action_hash": content["action_hash"], "threshold": 1}
        status, _, body = request(port, "POST", "/v1/approvals", opened, key)
        assert status in (200, 201), body
        token = sign_approval_token(
            approver,
            nonce=os.urandom(32),
            expiry=int(time.time()) + 3600,
            decision="approved",
            scope="payments.review",
            action_canonical=content_bytes(content),
        )
        votes.append((content["action_hash"], content, base64.b64encode(token).decode()))
    return votes


# -- checks -----------------------------------------------------------------------------------


def stored_hashes(cluster: Cluster, database: str) -> list[str]:
    import psycopg

    with psycopg.connect(cluster.superuser_url(database)) as conn:
        return [row[0] for row in conn.execute("SELECT action_hash FROM receipts_mirrorentry")]


def approved_with_vote(cluster: Cluster, action_hashes: list[str]) -> int:
    import psycopg

    with psycopg.connect(cluster.superuser_url("mirror_ks")) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT a.action_hash) FROM approvals_approval a "
            "JOIN approvals_approvalvote v ON v.approval_id = a.id "
            "WHERE a.status = 'approved' AND a.action_hash = ANY(%s)",
            [action_hashes],
        ).fetchone()
    return int(row[0]) if row else 0


def checkpoints_since(cluster: Cluster, database: str, moment: float) -> int:
    import psycopg

    with psycopg.connect(cluster.superuser_url(database)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM transparency_checkpoint WHERE published_at > to_timestamp(%s)",
            [moment],
        ).fetchone()
    return int(row[0]) if row else 0


def proofs_verify(deployment: Deployment, key: str, texts: list[str]) -> int:
    """How many of these receipts' inclusion proofs verify offline (no witness: the drill
    registers none, so ``--required 0``)."""
    verified = 0
    for text in texts:
        receipt = json.loads(text)
        action_hash = receipt["content"]["action_hash"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, _, body = request(
                deployment.port, "GET", f"/v1/receipts/{action_hash}/proof", None, key
            )
            if status == 200:
                break
            time.sleep(0.5)
        else:
            continue
        receipt["transparency"] = [json.loads(body)]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(receipt, handle)
        result = deployment.manage(
            "verify_transparency", handle.name, "--origin", ORIGIN, "--required", "0",
            check=False,
        )  # fmt: skip
        os.unlink(handle.name)
        verified += result.returncode == 0
    return verified


def window(timeline: list[tuple[float, bool]], after: float) -> tuple[float, float]:
    """(unavailability window, span of failures): from the first failed request started
    after ``after`` to the first request that succeeded after it, and to the last failure."""
    ordered = sorted(entry for entry in timeline if entry[0] >= after)
    failures = [started for started, ok in ordered if not ok]
    if not failures:
        return 0.0, 0.0
    first = failures[0]
    recovered = next((started for started, ok in ordered if ok and started > first), None)
    return (recovered or float("inf")) - first, failures[-1] - first


# -- the drill --------------------------------------------------------------------------------


def drill(seconds: float = 20.0, kill_after: float = 5.0, clients: int = 3) -> dict[str, Any]:
    """One run; returns the figures and the checks (``ok`` when every check held)."""
    if missing := missing_tools():
        raise RuntimeError(f"missing: {', '.join(missing)} (apt-get install patroni etcd-server)")
    from nacl.signing import SigningKey

    approver = SigningKey.generate()
    os.environ["HA_DRILL_APPROVER_SEED"] = bytes(approver).hex()
    cluster = new_cluster()
    deployments: list[Deployment] = []
    try:
        cluster.start()
        create_databases(cluster, ["mirror_ks", "mirror_tp"])
        ks = Deployment("keyscoped", "mirror_ks", free_port(), {}, cluster.root)
        tp = Deployment("teampath", "mirror_tp", free_port(), {}, cluster.root)
        for deployment in (ks, tp):
            deployment.env = deployment_env(
                cluster, deployment.profile, deployment.database, deployment.port
            )
            deployment.manage("migrate", "--noinput")
            deployments.append(deployment)
        public = base64.b64encode(bytes(approver.verify_key)).decode()
        ks_key = ks.manage("shell", "--no-imports", "-c", SETUP_KS.format(public=public))
        tp_key = tp.manage("shell", "--no-imports", "-c", SETUP_TP)
        ks_key_secret, tp_key_secret = ks_key.stdout.split()[0], tp_key.stdout.split()[0]
        ks.start(with_worker=True)
        tp.start(with_worker=False)
        web_workers = {d.profile: d.worker_pids() for d in deployments}
        votes = open_approvals(ks.port, ks_key_secret, 12 * clients)
        monitor_state = cluster.root / "monitor.state"
        time.sleep(3)  # an epoch or two: the monitor's first look has a checkpoint to keep
        first_look = ks.manage(
            "monitor_log", "--log", f"http://127.0.0.1:{ks.port}", "--origin", ORIGIN,
            "--state-file", str(monitor_state), "--no-events", check=False,
        )  # fmt: skip

        outcome = Outcome()
        started = time.monotonic()
        deadline = started + seconds + 60  # clients stop sending new work at `seconds`
        per_client = int(seconds * 25)
        ks_texts = [session_texts(per_client) for _ in range(clients)]
        tp_texts = [session_texts(per_client * 2) for _ in range(clients)]
        threads = (
            [
                threading.Thread(
                    target=ks_push_client,
                    args=(outcome, ks.port, ks_key_secret, texts, deadline, seconds),
                )
                for texts in ks_texts
            ]
            + [
                threading.Thread(
                    target=tp_batch_client,
                    args=(outcome, tp.port, tp_key_secret, texts, 10, deadline, seconds),
                )
                for texts in tp_texts
            ]
            + [
                threading.Thread(
                    target=vote_client,
                    args=(
                        outcome,
                        ks.port,
                        ks_key_secret,
                        votes[index::clients],
                        deadline,
                        seconds / 12,
                    ),
                )
                for index in range(clients)
            ]
        )
        for thread in threads:
            thread.start()
        time.sleep(kill_after)
        killed_at, killed_wall = time.monotonic(), time.time()
        old_primary = cluster.kill_primary_postmaster()
        for thread in threads:
            thread.join()
        finished = time.monotonic()
        cluster.wait(
            lambda: cluster.replicating() and old_primary.role() == "replica",
            120,
            "the old primary did not come back as a standby",
        )
        rejoined = time.monotonic() - killed_at
        new_primary = cluster.primary()
        time.sleep(5)  # epochs resume on the new primary

        unavailable, span = window(outcome.timeline, killed_at)
        stored = {name: set(stored_hashes(cluster, db)) for name, db in
                  (("ks", "mirror_ks"), ("tp", "mirror_tp"))}  # fmt: skip
        lost = {name: len(outcome.acknowledged.get(name, set()) - stored[name])
                for name in stored}  # fmt: skip
        chains = {
            d.profile: d.manage("verify_chain", slug, check=False)
            for d, slug in ((ks, "ha-ks"), (tp, "ha-tp"))
        }
        second_look = ks.manage(
            "monitor_log", "--log", f"http://127.0.0.1:{ks.port}", "--origin", ORIGIN,
            "--state-file", str(monitor_state), "--no-events", check=False,
        )  # fmt: skip
        sample = [ks_texts[0][0], ks_texts[0][-1]]
        tracebacks = sum(
            path.read_text(errors="replace").count("Traceback")
            for d in deployments
            for path in (d.web_log, d.worker_log)
            if path.exists()
        )
        figures: dict[str, Any] = {
            "acknowledged": {k: len(v) for k, v in outcome.acknowledged.items()},
            "in_chain": {k: len(v) for k, v in stored.items()},
            "acknowledged_but_lost": lost,
            "votes_acknowledged": len(outcome.votes),
            "votes_reconciled_after_a_lost_answer": outcome.reconciled,
            "votes_recorded": approved_with_vote(cluster, outcome.votes),
            "statuses": outcome.statuses,
            "unavailable_without_retry_after": outcome.unavailable_without_retry_after,
            "unfinished_clients": outcome.unfinished,
            "unavailability_window_s": round(unavailable, 2),
            "failure_span_s": round(span, 2),
            "old_primary_back_as_standby_after_s": round(rejoined, 1),
            "primary": {"before": old_primary.name, "after": new_primary and new_primary.name},
            "load_seconds": round(finished - started, 1),
            "verify_chain": {p: r.returncode == 0 for p, r in chains.items()},
            "monitor_log": [first_look.returncode, second_look.returncode],
            "proofs_verified": f"{proofs_verify(ks, ks_key_secret, sample)}/{len(sample)}",
            "checkpoints_after_failover": checkpoints_since(
                cluster, "mirror_ks", killed_wall + unavailable
            ),
            "web_workers_restarted": any(
                d.worker_pids() != web_workers[d.profile] for d in deployments
            ),
            "task_worker_alive": ks.worker is not None and ks.worker.poll() is None,
            "tracebacks_logged": tracebacks,
        }
        problems = []
        if any(lost.values()):
            problems.append("acknowledged receipts missing from the chain")
        if figures["votes_recorded"] != figures["votes_acknowledged"]:
            problems.append("an acknowledged vote is not recorded")
        if any(500 in counts for counts in outcome.statuses.values()):
            problems.append("a request answered 500")
        if outcome.unavailable_without_retry_after:
            problems.append("a 503 without Retry-After")
        if outcome.unfinished:
            problems.append("a client could not finish its work")
        if not all(figures["verify_chain"].values()):
            problems.append(f"verify_chain failed: {[r.stderr for r in chains.values()]}")
        if first_look.returncode or second_look.returncode:
            problems.append(f"monitor_log: {first_look.stderr[-500:]} {second_look.stderr[-500:]}")
        if figures["proofs_verified"] != f"{len(sample)}/{len(sample)}":
            problems.append("an inclusion proof did not verify")
        if not figures["checkpoints_after_failover"]:
            problems.append("no checkpoint was published after the failover")
        if figures["web_workers_restarted"] or not figures["task_worker_alive"]:
            problems.append("a web or task worker had to be restarted")
        if new_primary is None or new_primary is old_primary:
            problems.append("the primary did not move")
        figures["problems"] = problems
        figures["ok"] = not problems
        return figures
    finally:
        for deployment in deployments:
            deployment.stop()
        keep = bool(os.environ.get("HA_DRILL_KEEP"))
        cluster.stop(remove=not keep)
        if keep:
            print(f"logs kept in {cluster.root}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="of load per run")
    parser.add_argument("--kill-after", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=3, help="of each kind")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    failed = False
    for run in range(1, args.runs + 1):
        figures = drill(args.seconds, args.kill_after, args.clients)
        print(json.dumps({"run": run, **figures}, default=str))
        failed = failed or not figures["ok"]
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
