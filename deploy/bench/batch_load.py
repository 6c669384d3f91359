#!/usr/bin/env python
"""Load test of the team-path batch route, and of how a push's cost grows with the org.

Starts its own gunicorn (team-path profile, sync workers) on a fresh PostgreSQL database
and measures, in one run:
  * the batch route: ``POST /v1/receipts/batch`` with ``--batch`` receipts a request from
    ``--clients`` closed-loop clients, as accepted receipts/s;
  * verify-only: the same receipts through the verifier alone in ``--clients`` processes
    (no HTTP, no database), as receipts/s, and the batch rate's ratio to it;
  * growth: single pushes and batches into orgs that started empty and into orgs grown by
    ``--grown`` entries first (a bulk insert as the table owner, the head moved to the end,
    ANALYZE and CHECKPOINT), alternated, as the ratio grown / fresh;

Before anything is measured, a warm-up of 1,000 receipts and ANALYZE give the planner the
statistics autovacuum keeps on any deployment in use (``push_load.warm_up``); without them
(a fresh database where autovacuum is off) the batch's related read reads the whole org.

Everything is measured ``--rounds`` times, interleaved, and the medians are compared: the
machine is shared and noisy, so only figures of the same run compare.
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
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from deploy.bench.push_load import (  # noqa: E402
    PY,
    WARM_UP_RECEIPTS,
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
    warm_up,
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
                agent_identity, workflow, verb, decision_path, rule_id, tool_name)
            SELECT %(org)s, %(size)s + n, md5('grown' || n) || md5('more' || n),
                   repeat('x', 1200), '', 'action', 'L0', '', '', '', '', md5(n::text),
                   now(), 'grown-' || (n / 50), n %% 50, '', '', '', '', '', '', '', ''
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


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def checkpoint(owner_url: str) -> None:
    """Write out what the setup dirtied, so no run pays for it (nor for the next one)."""
    import psycopg

    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/mirror_bench")
    parser.add_argument("--owner-url", default=None)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
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
    # bench-0: the batch against verify-only; bench-1/2 grown by --grown entries, bench-3/4
    # fresh: single pushes and batches into each, alternated round by round.
    keys = setup_orgs(env, 5)
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
    print(f"team-path, gunicorn sync workers={args.workers}, {args.clients} clients, "
          f"{args.seconds:.0f}s per run, {args.rounds} rounds, batches of {args.batch}, "
          f"PostgreSQL, REDIS_URL {'set' if env.get('REDIS_URL') else 'unset'}")  # fmt: skip
    if args.grown:
        grow(owner_url, "bench-1", args.grown)
        grow(owner_url, "bench-2", args.grown)
    checkpoint(owner_url)
    server = start(env)
    rates: dict[str, list[float]] = {}
    try:
        wait_ready(args.port)
        # Statistics as autovacuum keeps them (push_load.analyze): --grown analysed its
        # entries already, but with --grown 0 the tables would never have any.
        warm_up(args.port, owner_url, batch_requests(receipt_texts(WARM_UP_RECEIPTS),
                                                     args.batch, keys[0]))  # fmt: skip
        for round_ in range(1, args.rounds + 1):
            texts = receipt_texts(budget)
            verify = verify_only_rate(texts[: budget // 2], args.clients)
            batches = batch_requests(texts, args.batch, keys[0])
            check_batch(args.port, batches[0], args.batch)
            batch = accepted_rate(load(args.port, batches[1:], args.clients, args.seconds),
                                  args.batch)  # fmt: skip
            rates.setdefault("verify", []).append(verify)
            rates.setdefault("batch", []).append(batch)
            line = f"round {round_}: batch {batch:.0f}/s, verify-only {verify:.0f}/s"
            if args.grown:
                for label, key in (("single fresh", keys[3]), ("single grown", keys[1])):
                    run = load(args.port, single_requests(receipt_texts(budget // 4), key),
                               args.clients, args.seconds)  # fmt: skip
                    rates.setdefault(label, []).append(run.rate)
                    line += f", {label} {run.rate:.0f}/s"
                for label, key in (("batch fresh", keys[4]), ("batch grown", keys[2])):
                    run = load(args.port, batch_requests(receipt_texts(budget), args.batch, key),
                               args.clients, args.seconds)  # fmt: skip
                    rates.setdefault(label, []).append(accepted_rate(run, args.batch))
                    line += f", {label} {rates[label][-1]:.0f}/s"
            print(line, flush=True)
    finally:
        stop(server)
    batch, verify = median(rates["batch"]), median(rates["verify"])
    print(f"medians of {args.rounds} rounds:")
    print(f"{'batch (accepted receipts/s)':<40} {batch:>9.0f}")
    print(f"{'verify only (same receipts)':<40} {verify:>9.0f}")
    print(f"{'batch / verify-only':<40} {batch / verify:>9.0%}")
    if args.grown:
        for kind, unit in (("single", "pushes/s"), ("batch", "receipts/s")):
            fresh, grown = median(rates[f"{kind} fresh"]), median(rates[f"{kind} grown"])
            print(f"{f'{kind}, fresh org':<40} {fresh:>9.0f} {unit}")
            print(f"{f'{kind}, org of {args.grown:,} entries':<40} {grown:>9.0f} {unit} "
                  f"({grown / fresh:.0%} of fresh)")  # fmt: skip

    for size in (10, int(env.get("TEAMPATH_BATCH_MAX", "100"))):
        server = start(env)
        try:
            wait_ready(args.port)
            requests = batch_requests(receipt_texts(size * 40), size, keys[0])
            load(args.port, requests, args.clients, args.seconds)
            print(f"{f'peak worker RSS, batches of {size}':<40} {peak_rss_mb(server.pid):>9.1f} MB")
        finally:
            stop(server)


if __name__ == "__main__":
    main()
