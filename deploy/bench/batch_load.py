#!/usr/bin/env python
"""Load test of the team-path batch route, and of how a push's cost grows with the org.

Starts its own gunicorn (team-path profile, sync workers) on a fresh PostgreSQL database
and measures, in one run:
  * the batch route: ``POST /v1/receipts/batch`` with ``--batch`` receipts a request from
    ``--clients`` closed-loop clients, as accepted receipts/s;
  * verify-only: the same receipts through the verifier alone in ``--clients`` processes
    (no HTTP, no database), as receipts/s, and the batch rate's ratio to it;
  * growth: single pushes and batches into one org while it is fresh, then again after
    ``--grown`` entries were added to that org (a bulk insert as the table owner, with the
    head moved to the end), as the ratio grown / fresh;
  * memory: the peak RSS of a worker after batches of 10 and of the configured maximum
    (a fresh gunicorn for each size).

    python deploy/bench/batch_load.py [--seconds 5] [--grown 100000] [--kill-worker]

--kill-worker is the fault test of the batch route: it SIGKILLs one gunicorn worker in the
middle of a run of batches, then checks that every receipt a batch answered accepted is in
the chain and that `manage.py verify_chain` passes.

REDIS_URL is taken from the environment (the limiter's bucket is then shared, as in
production). Load goes only to 127.0.0.1, and every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from deploy.bench.push_load import (  # noqa: E402
    PY,
    Run,
    env_for,
    forget_rate_limits,
    fresh_database,
    killed_mid_run,
    load,
    manage,
    send,
    setup_orgs,
    wait_ready,
)


def request_bytes(path: str, body: bytes, key: str) -> bytes:
    head = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Connection: close",
        f"Authorization: Bearer {key}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def receipt_texts(count: int) -> list[str]:
    """``count`` signed receipts of one session, as the SDK chains them."""
    from tests.receipts.factories import Agent, as_text

    session = Agent().session(f"bench-{secrets.token_hex(4)}", count)
    return [as_text(receipt) for receipt in session]


def batch_requests(texts: list[str], size: int, key: str) -> list[bytes]:
    return [
        request_bytes(
            "/v1/receipts/batch",
            ('{"receipts":[' + ",".join(texts[start : start + size]) + "]}").encode(),
            key,
        )
        for start in range(0, len(texts), size)
    ]


def single_requests(texts: list[str], key: str) -> list[bytes]:
    return [request_bytes("/v1/receipts", text.encode(), key) for text in texts]


def accepted_rate(run: Run, size: int) -> float:
    """Accepted receipts/s of a run of batches (every answer counted as ``size`` receipts
    when 200; the script checks the answers themselves in ``check_batch``)."""
    unexpected = {status: n for status, n in run.statuses.items() if status not in (200, 201)}
    if unexpected:
        print(f"  unexpected statuses: {unexpected}")
    return run.statuses.get(200, 0) * size / run.elapsed if run.elapsed else 0.0


def _verify_chunk(texts: list[str]) -> int:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    django.setup()
    from apps.receipts.verifier import verify_receipt

    return sum(verify_receipt(text).is_valid for text in texts)


def verify_only_rate(texts: list[str], processes: int) -> float:
    chunks = [texts[index::processes] for index in range(processes)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_verify_chunk, [chunk[:50] for chunk in chunks])  # warm up each process
        started = time.perf_counter()
        valid = sum(pool.map(_verify_chunk, chunks))
        elapsed = time.perf_counter() - started
    if valid != len(texts):
        raise SystemExit(f"verify-only: {len(texts) - valid} receipts did not verify")
    return len(texts) / elapsed


def grow(owner_url: str, slug: str, entries: int) -> None:
    """Add ``entries`` entries to the org (as the table owner), head moved to the end, and
    ANALYZE, as autovacuum would have by then."""
    import psycopg

    with psycopg.connect(owner_url, autocommit=True) as conn:
        org_id = conn.execute("SELECT id FROM tenancy_org WHERE slug = %s", [slug]).fetchone()[0]
        size = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM receipts_mirrorentry WHERE org_id = %s", [org_id]
        ).fetchone()[0]
        conn.execute(
            """
            INSERT INTO receipts_mirrorentry (
                org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level,
                claimed_trust_level, supersedes_action_hash, superseded_by, prev_chain_hash,
                chain_hash, received_at, session_id, session_seq, link_hash, operator_key,
                agent_identity, workflow, verb, decision_path, rule_id)
            SELECT %(org)s, %(size)s + n, md5('grown' || n) || md5('more' || n),
                   repeat('x', 1200), '', 'action', 'L0', '', '', '', '', md5(n::text),
                   now(), 'grown-' || (n / 50), n %% 50, '', '', '', '', '', '', ''
            FROM generate_series(1, %(entries)s) AS n
            """,
            {"org": org_id, "size": size, "entries": entries},
        )
        conn.execute(
            "INSERT INTO receipts_mirrorhead (org_id, size, head, month, month_count) "
            "VALUES (%s, %s, %s, '', 0) "
            "ON CONFLICT (org_id) DO UPDATE SET size = EXCLUDED.size",
            [org_id, size + entries, "0" * 64],
        )
        conn.execute("ANALYZE receipts_mirrorentry")


def check_batch(port: int, request: bytes, size: int) -> None:
    status, body = send(port, request)
    results = json.loads(body)
    if status != 200 or sum(result["accepted"] for result in results) != size:
        raise SystemExit(f"a batch was not accepted whole: {status} {body[:300]!r}")


def start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [PY, "-m", "gunicorn", "config.wsgi:application", "-c", "deploy/gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
    )


def stop(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)


def peak_rss_mb(master: int) -> float:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    peaks = []
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]) / 1024)
    return max(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/mirror_bench")
    parser.add_argument("--owner-url", default=None)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--grown", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--port", type=int, default=8812)
    parser.add_argument("--kill-worker", action="store_true")
    args = parser.parse_args()

    owner_url = args.owner_url or args.database_url
    env = env_for(args.database_url, args.port, args.workers)
    env.update(MIGRATION_DATABASE_URL=owner_url, API_PROFILE="teampath")
    fresh_database(owner_url)
    forget_rate_limits(env)
    manage(env, "migrate", "--noinput")
    keys = setup_orgs(env, 3)
    # Enough receipts that no run runs dry (a few thousand accepted receipts/s at most).
    budget = int(args.seconds * 8000)
    if args.kill_worker:
        server = start(env)
        try:
            wait_ready(args.port)
            requests = batch_requests(receipt_texts(budget), args.batch, keys[0])
            killed_mid_run(args, env, server.pid, requests, clients=max(args.clients, 4))
        finally:
            stop(server)
        return
    texts = receipt_texts(budget)
    print(f"team-path, gunicorn sync workers={args.workers}, {args.clients} clients, "
          f"{args.seconds:.0f}s per run, batches of {args.batch}, PostgreSQL, "
          f"REDIS_URL {'set' if env.get('REDIS_URL') else 'unset'}")  # fmt: skip

    verify_rate = verify_only_rate(texts[: budget // 2], args.clients)
    server = start(env)
    try:
        wait_ready(args.port)
        batches = batch_requests(texts, args.batch, keys[0])
        check_batch(args.port, batches[0], args.batch)
        fresh = load(args.port, batches[1:], args.clients, args.seconds)
        fresh_rate = accepted_rate(fresh, args.batch)
        singles = single_requests(receipt_texts(budget // 4), keys[1])
        fresh_single = load(args.port, singles, args.clients, args.seconds)
        print(f"{'batch, fresh org':<34} {fresh_rate:>9.0f} receipts/s")
        print(f"{'verify only (same receipts)':<34} {verify_rate:>9.0f} receipts/s")
        print(f"{'batch / verify-only':<34} {fresh_rate / verify_rate:>9.0%}")
        print(f"{'single push, fresh org':<34} {fresh_single.rate:>9.0f} pushes/s "
              f"(p50 {fresh_single.percentile(0.5):.1f} ms, "
              f"p99 {fresh_single.percentile(0.99):.1f} ms)")  # fmt: skip
        if args.grown:
            grow(owner_url, "bench-2", args.grown)
            grow(owner_url, "bench-1", args.grown)
            grown_batches = batch_requests(receipt_texts(budget), args.batch, keys[2])
            grown = load(args.port, grown_batches, args.clients, args.seconds)
            grown_rate = accepted_rate(grown, args.batch)
            grown_single = load(
                args.port, single_requests(receipt_texts(budget // 4), keys[1]), args.clients,
                args.seconds,
            )  # fmt: skip
            print(f"{f'batch, org of {args.grown:,} entries':<34} {grown_rate:>9.0f} receipts/s "
                  f"({grown_rate / fresh_rate:.0%} of fresh)")  # fmt: skip
            print(f"{f'single, org of {args.grown:,} entries':<34} {grown_single.rate:>9.0f} "
                  f"pushes/s ({grown_single.rate / fresh_single.rate:.0%} of fresh)")  # fmt: skip
    finally:
        stop(server)

    for size in (10, int(env.get("TEAMPATH_BATCH_MAX", "100"))):
        server = start(env)
        try:
            wait_ready(args.port)
            requests = batch_requests(receipt_texts(size * 40), size, keys[0])
            load(args.port, requests, args.clients, args.seconds)
            print(f"{f'peak worker RSS, batches of {size}':<34} {peak_rss_mb(server.pid):>9.1f} MB")
        finally:
            stop(server)


if __name__ == "__main__":
    main()
