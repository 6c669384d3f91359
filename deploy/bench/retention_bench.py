#!/usr/bin/env python
"""What retiring receipt bodies does to the mirror's storage (docs/retention.md), on a fresh
PostgreSQL database.

One org is bulk-loaded to ``--entries`` (default 1,000,000) entries beside an org of
10,000 (COPY as the table owner, as transparency_bench.py does), each with a receipt text
of ``--receipt-bytes`` (default 1,400: a signed receipt's size) that does not compress.
Then, in one run, the table's bytes (heap, TOAST, indexes) per receipt:

  1. loaded (after VACUUM ANALYZE);
  2. right after retiring the oldest 90% of the big org's bodies with the real service
     (``mirror_bodies_retire``, batched UPDATEs as the application role), with its time;
  3. after a plain ``VACUUM`` (what autovacuum does: no lock that stops the append);
  4. after appending 10% more entries: whether they reuse the space VACUUM freed;
  5. after ``VACUUM FULL`` (an exclusive lock for its whole run: for comparison only).

    python deploy/bench/retention_bench.py [--entries 1000000] [--receipt-bytes 1400]

:func:`retire_fraction` is the retirement another benchmark can call (read_scale.py: the
bytes per receipt before and after retiring 90% of an org's bodies).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from deploy.bench.push_load import PY, env_for, fresh_database, manage  # noqa: E402

ENTRY_COLUMNS = (
    "org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level, claimed_trust_level, "
    "supersedes_action_hash, superseded_by, prev_chain_hash, chain_hash, received_at, "
    "session_id, link_hash, operator_key, agent_identity, workflow, verb, decision_path, rule_id"
)
SIZES = """
SELECT pg_relation_size(c.oid), pg_relation_size(c.reltoastrelid),
       pg_indexes_size(c.oid), pg_total_relation_size(c.oid)
FROM pg_class c WHERE c.relname = 'receipts_mirrorentry'
"""


def retire_fraction(org: Any, fraction: float = 0.9) -> int:
    """Retire the bodies of the oldest ``fraction`` of ``org``'s entries, as the retention
    worker does once their archive verified (here without an archive: a benchmark of the
    storage only). The number of entries retired."""
    from apps.receipts.selectors import mirror_head_get
    from apps.receipts.services import mirror_bodies_retire

    last = int(mirror_head_get(org=org).size * fraction)
    return mirror_bodies_retire(org=org, first_seq=1, last_seq=last) if last else 0


def copy_entries(owner: Any, org_pk: int, start: int, count: int, receipt_bytes: int) -> None:
    zero = "0" * 64
    with owner.cursor() as cursor:
        with cursor.copy(f"COPY receipts_mirrorentry ({ENTRY_COLUMNS}) FROM STDIN") as copy:
            for seq in range(start + 1, start + count + 1):
                # Random text: incompressible, as the signatures and hashes of a receipt are.
                body = '{"receipt":"' + os.urandom(receipt_bytes // 2).hex()[: receipt_bytes - 14]
                copy.write_row(
                    (org_pk, seq, f"{org_pk:08x}{seq:056x}", body + '"}', zero, "action", "L0",
                     "", "", "", zero, zero, "2026-01-15T00:00:00Z", "", zero, "", "", "", "",
                     "", "")
                )  # fmt: skip
        cursor.execute(
            "INSERT INTO receipts_mirrorhead (org_id, size, head, month, month_count) "
            "VALUES (%s, %s, %s, '', 0) ON CONFLICT (org_id) DO UPDATE SET size = EXCLUDED.size",
            [org_pk, start + count, zero],
        )
    owner.commit()


def sizes(owner: Any, label: str, receipts: int) -> dict[str, Any]:
    with owner.cursor() as cursor:
        cursor.execute(SIZES)
        heap, toast, indexes, total = cursor.fetchone()
    return {
        "step": label,
        "receipts": receipts,
        "heap_mb": round(heap / 2**20, 1),
        "toast_mb": round(toast / 2**20, 1),
        "indexes_mb": round(indexes / 2**20, 1),
        "total_mb": round(total / 2**20, 1),
        "bytes_per_receipt": round(total / receipts),
    }


def inner(args: argparse.Namespace) -> list[dict[str, Any]]:
    import psycopg

    from apps.tenancy.models import Org, Plan
    from apps.tenancy.org_context import activate_all_orgs
    from apps.tenancy.services import org_create

    activate_all_orgs()
    big = org_create(slug="big", plan=Plan.CUSTOM)
    small = org_create(slug="small", plan=Plan.CUSTOM)
    n, extra = args.entries, args.entries // 10
    rows: list[dict[str, Any]] = []
    with psycopg.connect(args.owner_url, autocommit=False) as owner:
        copy_entries(owner, small.pk, 0, 10_000, args.receipt_bytes)
        copy_entries(owner, big.pk, 0, n, args.receipt_bytes)
        owner.autocommit = True
        owner.execute("VACUUM ANALYZE receipts_mirrorentry")
        total = n + 10_000
        rows.append(sizes(owner, "loaded", total))
        started = time.perf_counter()
        retired = retire_fraction(Org.objects.get(pk=big.pk), 0.9)
        seconds = time.perf_counter() - started
        rows.append({**sizes(owner, "retired 90% (no VACUUM yet)", total), "retired": retired,
                     "retire_seconds": round(seconds, 1)})  # fmt: skip
        owner.execute("VACUUM receipts_mirrorentry")
        rows.append(sizes(owner, "after plain VACUUM", total))
        owner.autocommit = False
        copy_entries(owner, big.pk, n, extra, args.receipt_bytes)
        owner.autocommit = True
        owner.execute("VACUUM ANALYZE receipts_mirrorentry")
        rows.append(sizes(owner, f"after appending {extra} more", total + extra))
        owner.execute("VACUUM FULL receipts_mirrorentry")
        rows.append(sizes(owner, "after VACUUM FULL (exclusive lock)", total + extra))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://mirror_app@127.0.0.1:5432/retention_bench"
    )
    parser.add_argument("--owner-url", default="postgres://postgres@127.0.0.1:5432/retention_bench")
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--receipt-bytes", type=int, default=1400)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        import django

        django.setup()
        print(json.dumps(inner(args)))
        return
    env = env_for(args.database_url, 8813, 1)
    env["MIGRATION_DATABASE_URL"] = args.owner_url
    fresh_database(args.owner_url)
    manage(env, "migrate", "--noinput")
    passed = ["--database-url", args.database_url, "--owner-url", args.owner_url,
              "--entries", str(args.entries),
              "--receipt-bytes", str(args.receipt_bytes)]  # fmt: skip
    done = subprocess.run(
        [PY, __file__, "--inner", *passed],
        cwd=ROOT,
        env={**env, "ORG_CONTEXT_DEFAULT": "all"},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit("the retention benchmark failed")
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
