#!/usr/bin/env python
"""Load test of POST /v1/receipts against gunicorn (sync workers) on PostgreSQL.

Starts its own gunicorn on a fresh database, then, at each concurrency level, measures
for the same duration and with the same client:
  * the framework ceiling: GET /healthz, a trivial DRF endpoint;
  * pushes of fresh signed receipts for one org;
  * pushes spread over many orgs.
The three are measured in ``--rounds`` short rounds, interleaved, and the medians are
printed (the machine is shared and noisy: a ceiling measured a minute apart does not
compare). Prints receipts/s and p50/p99 latency, and each push figure as the median of its
rounds' ratios to the ceiling measured just before.

    python deploy/bench/push_load.py [--levels 1,8,32] [--seconds 3] [--rounds 5] [--kill-worker]

--kill-worker is the fault test: it SIGKILLs one gunicorn worker in the middle of a push
run, then checks that every receipt answered 201 is in the chain and that
`manage.py verify_chain` passes.

Load goes only to 127.0.0.1, and every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PY = sys.executable
# Receipts sent before anything is measured, then ANALYZE (``warm_up``): enough that the
# statistics show a table in use (a table analysed while nearly empty plans sequential
# scans, which read the whole table once it grows).
WARM_UP_RECEIPTS = 1000


@dataclass
class Run:
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    # The id of every receipt stored by an answer: each 201's entry_hash (key-scoped) or
    # receiptId (team-path), and each accepted result of a batch's 200.
    created: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000


def env_for(database_url: str, port: int, workers: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="bench-" + secrets.token_urlsafe(50),
        DATABASE_URL=database_url,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="false",
        SECURE_HSTS_SECONDS="0",
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS=str(workers),
        GUNICORN_ACCESSLOG="",
        RECEIPT_CAP_CUSTOM="100000000",
        # Production settings require the transparency log's origin (check mirror.E201).
        TRANSPARENCY_ORIGIN="bench.example/v1/log",
        # The limiter runs (its cost is part of the path) but never refuses the load.
        RATE_CUSTOM_PER_MINUTE="100000000",
        RATE_CUSTOM_BURST="100000",
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def forget_rate_limits(env: dict[str, str]) -> None:
    """A fresh database reuses org ids: drop the buckets earlier runs left in Redis."""
    if not env.get("REDIS_URL"):
        return
    import redis

    client = redis.Redis.from_url(env["REDIS_URL"])
    keys = list(client.scan_iter("ratelimit:*"))
    if keys:
        client.delete(*keys)


def fresh_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin_url = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


SETUP = """
from apps.tenancy.services import api_key_issue, org_create
for index in range({count}):
    org = org_create(slug=f"bench-{{index}}", plan="custom")
    print(api_key_issue(org=org, scopes=["receipts:write"]).secret)
"""


def setup_orgs(env: dict[str, str], count: int) -> list[str]:
    """``count`` orgs with one receipts:write key each, through the same services."""
    out = manage(env, "shell", "--no-imports", "-c", SETUP.format(count=count))
    return [line for line in out.split() if line.startswith("hk_")]


def request_bytes(method: str, path: str, body: bytes = b"", key: str | None = None) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if key:
        head.append(f"x-api-key: {key}")
    if body:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def send(port: int, raw: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(raw)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    response = b"".join(chunks)
    if not response:  # the worker died before answering (the fault test kills one)
        return 0, b""
    status = int(response.split(b" ", 2)[1])
    return status, response.split(b"\r\n\r\n", 1)[1]


def load(port: int, requests: list[bytes], clients: int, seconds: float) -> Run:
    """``clients`` closed-loop clients send ``requests`` (each at most once) for ``seconds``."""
    run = Run()
    lock = threading.Lock()
    cursor = iter(range(len(requests)))
    deadline = time.perf_counter() + seconds

    def client() -> None:
        while time.perf_counter() < deadline:
            with lock:
                index = next(cursor, None)
            if index is None:
                return
            started = time.perf_counter()
            status, body = send(port, requests[index])
            took = time.perf_counter() - started
            with lock:
                run.latencies.append(took)
                run.statuses[status] = run.statuses.get(status, 0) + 1
                if status == 201:  # key-scoped names the entry entry_hash, team-path receiptId
                    answer = json.loads(body)
                    run.created.append(answer.get("entry_hash") or answer["receiptId"])
                elif status == 200 and body.startswith(b"["):  # a team-path batch's results
                    run.created += [r["receiptId"] for r in json.loads(body) if r["accepted"]]

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.elapsed = time.perf_counter() - started
    return run


def push_requests(keys: list[str], count: int) -> list[bytes]:
    from tests.receipts.factories import Agent, as_text

    # Like the SDK: every receipt carries a session chain block (so the continuity check
    # runs), one session per org, interleaved across orgs.
    per_org = -(-count // len(keys))
    sessions = [Agent().session(f"bench-session-{secrets.token_hex(4)}", per_org) for _ in keys]
    out = []
    for index in range(count):
        slot = index % len(keys)
        receipt_text = as_text(sessions[slot][index // len(keys)])
        body = ('{"receipt":' + receipt_text + "}").encode()
        out.append(request_bytes("POST", "/v1/receipts", body, keys[slot]))
    return out


def analyze(owner_url: str) -> None:
    """Give the planner the statistics autovacuum keeps on any deployment that has taken
    receipts (as the table owner), and write out what that dirtied.

    A freshly created database has none, and where autovacuum is off (as on the
    development machine) it never gets any: the append's generic plans then read the
    related entries through the index on the org alone, all of the org's entries on every
    push or batch, and a connection plans with statistics-free estimates until its table
    holds about 10,000 entries (docs/performance/receipts.md). An ``ANALYZE`` invalidates
    the plans the workers cached, so they are planned anew at their next append."""
    import psycopg

    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        conn.execute("CHECKPOINT")


def warm_up(port: int, owner_url: str, requests: list[bytes]) -> None:
    """Send ``requests`` (each must be answered 2xx), then ``analyze``: what a deployment
    that has taken receipts for a minute has, before anything is measured."""
    for request in requests:
        status, body = send(port, request)
        if status not in (200, 201):
            raise SystemExit(f"a warm-up request was refused: {status} {body[:300]!r}")
    analyze(owner_url)


def wait_ready(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if send(port, request_bytes("GET", "/healthz"))[0] == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("gunicorn did not become ready")


def worker_pids(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/mirror_bench")
    parser.add_argument(
        "--owner-url",
        default=None,
        help="the table owner for migrations (default: --database-url); pass it with an "
        "ordinary --database-url role to measure under row-level security",
    )
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--seconds", type=float, default=3.0, help="per target and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--orgs", type=int, default=32, help="orgs in the many-orgs runs")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--port", type=int, default=8811)
    parser.add_argument("--kill-worker", action="store_true")
    args = parser.parse_args()

    owner_url = args.owner_url or args.database_url
    env = env_for(args.database_url, args.port, args.workers)
    env["MIGRATION_DATABASE_URL"] = owner_url
    fresh_database(owner_url)
    forget_rate_limits(env)
    manage(env, "migrate", "--noinput")
    keys = setup_orgs(env, args.orgs)
    levels = [int(level) for level in args.levels.split(",")]
    # Enough fresh receipts that no run runs dry (measured ceiling ~ a few thousand/s).
    per_run = int(args.seconds * 2500)

    server = subprocess.Popen(
        [PY, "-m", "gunicorn", "config.wsgi:application", "-c", "deploy/gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_ready(args.port)
        if args.kill_worker:
            fault_test(args, env, server.pid, keys)
            return
        warm_up(args.port, owner_url, push_requests(keys, WARM_UP_RECEIPTS))
        print(
            f"gunicorn sync workers={args.workers}, PostgreSQL, {args.rounds} rounds of "
            f"{args.seconds:g}s per target, interleaved; medians over the rounds"
        )
        print(
            f"{'clients':>7} {'target':<16} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'ratio':>6}"
        )
        for clients in levels:
            rounds: dict[str, list[Run]] = {}
            for _ in range(args.rounds):
                ceiling = load(
                    args.port, [request_bytes("GET", "/healthz")] * per_run * 2, clients,
                    args.seconds,
                )  # fmt: skip
                rounds.setdefault("healthz ceiling", []).append(ceiling)
                for label, org_keys in (("push one org", keys[:1]), ("push many orgs", keys)):
                    run = load(args.port, push_requests(org_keys, per_run), clients, args.seconds)
                    unexpected = {s: n for s, n in run.statuses.items() if s != 201}
                    if unexpected:
                        print(f"  unexpected statuses: {unexpected}")
                    rounds.setdefault(label, []).append(run)
            ceilings = rounds["healthz ceiling"]
            for label, runs in rounds.items():
                report(clients, label, runs, None if label == "healthz ceiling" else ceilings)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def report(clients: int, label: str, runs: list[Run], ceilings: list[Run] | None) -> None:
    """Medians over the rounds; the ratio is the median of each round's push rate over the
    ceiling measured just before it (the machine is noisy: only neighbours compare)."""
    median = statistics.median
    ratio = ""
    if ceilings:
        ratio = f"{median(r.rate / c.rate for r, c in zip(runs, ceilings, strict=True)):.0%}"
    print(
        f"{clients:>7} {label:<16} {median(r.rate for r in runs):>8.0f} "
        f"{median(r.percentile(0.5) for r in runs):>7.1f} "
        f"{median(r.percentile(0.99) for r in runs):>7.1f} {ratio:>6}"
    )


def fault_test(args: argparse.Namespace, env: dict[str, str], master: int, keys: list[str]) -> None:
    requests = push_requests(keys[:1], int(args.seconds * 2500))
    killed_mid_run(args, env, master, requests, clients=8)


def killed_mid_run(
    args: argparse.Namespace,
    env: dict[str, str],
    master: int,
    requests: list[bytes],
    clients: int,
) -> None:
    """Send ``requests`` into org bench-0, SIGKILL a worker half-way through, then check
    that every receipt an answer said was stored is in the chain, and the chain verifies."""
    victim = worker_pids(master)[0]
    killer = threading.Timer(args.seconds / 2, lambda: os.kill(victim, signal.SIGKILL))
    killer.start()
    run = load(args.port, requests, clients, args.seconds)
    killer.join()
    print(f"killed worker {victim} mid-run; statuses: {run.statuses}")
    import psycopg

    # As the table owner: the application role sees no org's rows outside a request.
    with psycopg.connect(args.owner_url or args.database_url) as conn:
        rows = conn.execute(
            "SELECT action_hash FROM receipts_mirrorentry e JOIN tenancy_org o ON o.id = e.org_id "
            "WHERE o.slug = 'bench-0'"
        ).fetchall()
    stored = {row[0] for row in rows}
    missing = [h for h in run.created if h not in stored]
    print(
        f"answered stored: {len(run.created)}, in the chain: {len(stored)}, answered stored but "
        f"missing: {len(missing)}"
    )
    verdict = subprocess.run(
        [PY, "manage.py", "verify_chain", "bench-0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    print(f"verify_chain exit {verdict.returncode}: {(verdict.stdout or verdict.stderr).strip()}")
    if missing or verdict.returncode != 0:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
