#!/usr/bin/env python
"""Benchmarks of the transparency log (transparency.md), on a fresh PostgreSQL database.

Measures, in one run:
  * proofs: the proof object of ``GET /v1/receipts/{action_hash}/proof`` (the real selector,
    ``receipt_proof``, over the stored nodes) for random entries of an org of ``--entries``
    (default 1,000,000) entries, median and p99, as the application role in that org's
    row-level-security context. The org's mirror entries and tree nodes are written in bulk
    (COPY as the table owner) rather than pushed one by one; the tree nodes are the ones
    ``org_tree_extend`` stores (the same append code, run in memory);
  * epochs: ``transparency_publish_epoch`` with ``--orgs`` (default 1,000) changed orgs,
    each with new mirror entries: the whole run (extending every org tree, then the epoch
    transaction), then the epoch transaction alone (trees already extended);
  * pushes with the log on against off, in the same run: ``POST /v1/receipts`` through
    gunicorn with the publisher (``publish_checkpoint --every 1``) running beside it, and
    without it, alternated (off, on) ``--rounds`` times with the same client and duration;
    the publisher's own CPU use during each 'on' run is reported too.

    python deploy/bench/transparency_bench.py [--entries 1000000] [--orgs 1000]
        [--seconds 5] [--rounds 3] [--parts proofs,epochs,push]

Load goes only to 127.0.0.1, and every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
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
    env_for,
    forget_rate_limits,
    fresh_database,
    load,
    manage,
    push_requests,
    setup_orgs,
    wait_ready,
)

ENTRY_COLUMNS = (
    "org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level, claimed_trust_level, "
    "supersedes_action_hash, superseded_by, prev_chain_hash, chain_hash, received_at, "
    "session_id, link_hash, operator_key, agent_identity, workflow, verb, decision_path, rule_id, "
    "tool_name"
)


def action_hash(org: int, seq: int) -> bytes:
    return hashlib.sha256(b"bench %d %d" % (org, seq)).digest()


def copy_entries(owner: object, org_pk: int, start: int, count: int) -> None:
    """Mirror entries ``start+1 … start+count`` of an org, written as the table owner."""
    zero = "0" * 64
    with owner.cursor() as cursor:  # type: ignore[attr-defined]
        with cursor.copy(f"COPY receipts_mirrorentry ({ENTRY_COLUMNS}) FROM STDIN") as copy:
            for seq in range(start + 1, start + count + 1):
                copy.write_row(
                    (org_pk, seq, action_hash(org_pk, seq).hex(), "{}", zero, "action", "L0",
                     "", "", "", zero, zero, "2026-11-24T00:00:00Z", "", zero, "", "", "", "",
                     "", "", "")
                )  # fmt: skip
        cursor.execute(
            "INSERT INTO receipts_mirrorhead (org_id, size, head, month, month_count) "
            "VALUES (%s, %s, %s, '', 0) ON CONFLICT (org_id) DO UPDATE SET size = EXCLUDED.size",
            [org_pk, start + count, zero],
        )
    owner.commit()  # type: ignore[attr-defined]


def inner_proofs(args: argparse.Namespace) -> dict[str, object]:
    import psycopg

    from apps.receipts.models import MirrorEntry
    from apps.tenancy.models import Org, Plan
    from apps.tenancy.org_context import activate_all_orgs, activate_orgs
    from apps.tenancy.services import org_create
    from apps.transparency.models import OrgLog
    from apps.transparency.selectors import receipt_proof
    from apps.transparency.services import transparency_publish_epoch
    from apps.transparency.tree.merkle import append_hashes, leaf_hash, root_of_frontier

    activate_all_orgs()
    org = org_create(slug="big", name="Big", plan=Plan.CUSTOM)
    n = args.entries
    started = time.perf_counter()
    with psycopg.connect(args.owner_url) as owner:
        copy_entries(owner, org.pk, 0, n)
        created, edge, size = append_hashes(
            0, {}, (leaf_hash(action_hash(org.pk, seq)) for seq in range(1, n + 1))
        )
        with owner.cursor() as cursor:
            with cursor.copy(
                "COPY transparency_orgtreenode (org_id, level, index, hash) FROM STDIN"
            ) as copy:
                for level, index, value in created:
                    copy.write_row((org.pk, level, index, value))
            cursor.execute(
                "UPDATE transparency_orglog SET tree_size = %s, tree_root = %s WHERE org_id = %s",
                [size, root_of_frontier(edge), org.pk],
            )
            cursor.execute("ANALYZE transparency_orgtreenode")
            cursor.execute("ANALYZE receipts_mirrorentry")
        owner.commit()
    setup_seconds = time.perf_counter() - started
    epoch = transparency_publish_epoch()
    assert epoch.published
    assert OrgLog.objects.get(org=org).published_size == n
    org = Org.objects.get(pk=org.pk)
    activate_orgs([org.pk])  # as a request of that org's key
    assert MirrorEntry.objects.filter(org=org).count() == n
    rng = random.Random(7)
    samples = [action_hash(org.pk, rng.randint(1, n)).hex() for _ in range(args.proofs)]
    for sample in samples[:20]:  # warm the connection and caches
        receipt_proof(org=org, action_hash=sample)
    timings = []
    for sample in samples:
        begun = time.perf_counter()
        proof = receipt_proof(org=org, action_hash=sample)
        timings.append(time.perf_counter() - begun)
    assert proof["org_tree_size"] == n
    timings.sort()
    return {
        "entries": n,
        "tree_nodes": len(created),
        "setup_seconds": round(setup_seconds, 1),
        "proofs": len(timings),
        "median_ms": round(statistics.median(timings) * 1000, 2),
        "p99_ms": round(timings[int(0.99 * (len(timings) - 1))] * 1000, 2),
    }


def inner_epochs(args: argparse.Namespace) -> dict[str, object]:
    import psycopg

    from apps.tenancy.models import Plan
    from apps.tenancy.org_context import activate_all_orgs
    from apps.tenancy.services import org_create
    from apps.transparency.services import org_trees_extend, transparency_publish_epoch

    activate_all_orgs()
    orgs = [
        org_create(slug=f"epoch-{i}", name=f"Epoch {i}", plan=Plan.CUSTOM) for i in range(args.orgs)
    ]
    rounds = []
    with psycopg.connect(args.owner_url) as owner:
        for round_number in range(2):
            for org in orgs:
                copy_entries(owner, org.pk, round_number * 5, 5)
            begun = time.perf_counter()
            whole = transparency_publish_epoch()
            whole_seconds = time.perf_counter() - begun
            assert whole.leaves == args.orgs
            for org in orgs:
                copy_entries(owner, org.pk, round_number * 5 + 5, 0)
            rounds.append(round(whole_seconds, 3))
        # The epoch transaction alone: trees already extended.
        for org in orgs:
            copy_entries(owner, org.pk, 10, 3)
        org_trees_extend()
        begun = time.perf_counter()
        alone = transparency_publish_epoch()
        alone_seconds = time.perf_counter() - begun
        assert alone.leaves == args.orgs
    return {
        "changed_orgs": args.orgs,
        "extend_and_publish_seconds": rounds,
        "publish_only_seconds": round(alone_seconds, 3),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def push_on_off(args: argparse.Namespace, env: dict[str, str]) -> list[dict[str, object]]:
    keys = setup_orgs(env, 8)
    per_run = int(args.seconds * 2500)
    server = subprocess.Popen(
        [PY, "-m", "gunicorn", "config.wsgi:application", "-c", "deploy/gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
    )
    results = []
    try:
        wait_ready(args.port)
        for label in ("off", "on") * args.rounds:
            publisher = None
            if label == "on":
                publisher = subprocess.Popen(
                    [PY, "manage.py", "publish_checkpoint", "--every", "1"],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                )
                time.sleep(2)  # past its start-up: measure the periodic work, not the import
            cpu_before = cpu_seconds(publisher.pid) if publisher else 0.0
            try:
                run = load(args.port, push_requests(keys, per_run), args.clients, args.seconds)
            finally:
                cpu = cpu_seconds(publisher.pid) - cpu_before if publisher else 0.0
                if publisher is not None:
                    publisher.send_signal(signal.SIGTERM)
                    publisher.wait(timeout=30)
            results.append(
                {
                    "log": label,
                    "pushes_per_s": round(run.rate, 1),
                    "p50_ms": round(run.percentile(0.5), 2),
                    "p99_ms": round(run.percentile(0.99), 2),
                    "publisher_cpu_percent": round(100 * cpu / run.elapsed, 2),
                    "statuses": run.statuses,
                }
            )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgres://mirror_app@127.0.0.1:5432/tlog_bench")
    parser.add_argument("--owner-url", default="postgres://postgres@127.0.0.1:5432/tlog_bench")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--proofs", type=int, default=2000)
    parser.add_argument("--orgs", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--port", type=int, default=8812)
    parser.add_argument("--rounds", type=int, default=3, help="off/on pairs of push runs")
    parser.add_argument("--parts", default="proofs,epochs,push")
    parser.add_argument("--inner", choices=["proofs", "epochs"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.inner:
        import django

        django.setup()
        result = inner_proofs(args) if args.inner == "proofs" else inner_epochs(args)
        print(json.dumps(result))
        return

    env = env_for(args.database_url, args.port, args.workers)
    env["MIGRATION_DATABASE_URL"] = args.owner_url
    env["TRANSPARENCY_ORIGIN"] = "bench.example/v1/log"
    env["TRANSPARENCY_EPOCH_SECONDS"] = "1"
    fresh_database(args.owner_url)
    forget_rate_limits(env)
    manage(env, "migrate", "--noinput")
    passed = ["--database-url", args.database_url, "--owner-url", args.owner_url,
              "--entries", str(args.entries), "--proofs", str(args.proofs),
              "--orgs", str(args.orgs)]  # fmt: skip
    parts = args.parts.split(",")
    for part in [part for part in ("proofs", "epochs") if part in parts]:
        done = subprocess.run(
            [PY, __file__, "--inner", part, *passed],
            cwd=ROOT,
            env={**env, "ORG_CONTEXT_DEFAULT": "all"},
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"the {part} benchmark failed")
        print(f"{part}: {done.stdout.strip().splitlines()[-1]}")
    if "push" in parts:
        for row in push_on_off(args, env):
            print("push:", json.dumps(row))


if __name__ == "__main__":
    main()
