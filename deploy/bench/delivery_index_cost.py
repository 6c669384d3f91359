"""What the delivery log's indexes cost the delivery write path: deliveries inserted (made
for an event) and updated (an attempt's outcome) on a copy of the delivery table holding
100,000 deliveries of one org over three endpoints, with each index set the log was paged
through or could be:

- ``before``: the set before issue 30 (the due index, (endpoint, created_at), one index
  per foreign key, the (endpoint, event) unique one);
- ``endpoint``: what events migration 0009 leaves (the due index, (endpoint, created_at,
  id) including the org, the (event, endpoint) unique one): the log is paged per endpoint;
- ``org``: the same plus an (org, created_at, id) index, the alternative of paging the log
  by org.

    python deploy/bench/delivery_index_cost.py postgres://postgres@127.0.0.1:5432/DB

Prints the median microseconds per row inserted and per row updated of each variant.
"""

from __future__ import annotations

import statistics
import sys
import time

import psycopg

BASE = """
CREATE TEMPORARY TABLE bench_delivery (
    id bigserial PRIMARY KEY, org_id bigint NOT NULL, endpoint_id bigint NOT NULL,
    event_id bigint NOT NULL, status varchar(16) NOT NULL, attempts integer NOT NULL,
    next_attempt_at timestamptz NOT NULL, claimed_until timestamptz,
    last_attempt_at timestamptz, last_status_code integer, last_latency_ms integer,
    last_error varchar(300) NOT NULL DEFAULT '', delivered_at timestamptz,
    created_at timestamptz NOT NULL)
"""
DUE = "CREATE INDEX ON bench_delivery (next_attempt_at) WHERE status IN ('pending', 'sending')"
VARIANTS = {
    "before": [
        DUE,
        "CREATE INDEX ON bench_delivery (endpoint_id, created_at DESC)",
        "CREATE INDEX ON bench_delivery (endpoint_id)",
        "CREATE INDEX ON bench_delivery (event_id)",
        "CREATE UNIQUE INDEX ON bench_delivery (endpoint_id, event_id)",
    ],
    "endpoint": [
        DUE,
        "CREATE INDEX ON bench_delivery (endpoint_id, created_at DESC, id DESC) INCLUDE (org_id)",
        "CREATE UNIQUE INDEX ON bench_delivery (event_id, endpoint_id)",
    ],
}
VARIANTS["org"] = [
    *VARIANTS["endpoint"],
    "CREATE INDEX ON bench_delivery (org_id, created_at DESC, id DESC)",
]
FILL = 100_000
BATCH = 10_000
ROUNDS = 9


def measure(url: str, variant: str) -> tuple[float, float]:
    """Microseconds per row written: ``ROUNDS`` batches of ``BATCH`` deliveries inserted in
    one statement, then each given an attempt's outcome in one statement (the server's
    work per row, index upkeep included, without a round trip per row)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(BASE)
        conn.execute(
            "INSERT INTO bench_delivery (org_id, endpoint_id, event_id, status, attempts, "
            "next_attempt_at, last_attempt_at, delivered_at, created_at) "
            "SELECT 1, 1 + n %% 3, n, 'succeeded', 1, t, t, t, t FROM ("
            "SELECT n, now() - n * interval '90 seconds' AS t "
            "FROM generate_series(%s, 1, -1) AS n) AS rows",
            [FILL],
        )
        for statement in VARIANTS[variant]:
            conn.execute(statement)
        conn.execute("VACUUM ANALYZE bench_delivery")
        inserts, updates = [], []
        first = FILL + 1
        for _ in range(ROUNDS):
            last = first + BATCH - 1
            started = time.perf_counter()
            conn.execute(
                "INSERT INTO bench_delivery (org_id, endpoint_id, event_id, status, attempts, "
                "next_attempt_at, created_at) SELECT 1, 1 + n %% 3, n, 'pending', 0, now(), "
                "now() FROM generate_series(%s, %s) AS n",
                [first, last],
            )
            inserts.append((time.perf_counter() - started) / BATCH)
            started = time.perf_counter()
            conn.execute(
                "UPDATE bench_delivery SET status = 'succeeded', attempts = 1, "
                "last_attempt_at = now(), last_status_code = 200, last_latency_ms = 40, "
                "delivered_at = now() WHERE event_id BETWEEN %s AND %s",
                [first, last],
            )
            updates.append((time.perf_counter() - started) / BATCH)
            first = last + 1
        conn.execute("DROP TABLE bench_delivery")
    return statistics.median(inserts) * 1e6, statistics.median(updates) * 1e6


def main() -> None:
    url = sys.argv[1]
    for variant in VARIANTS:
        insert, update = measure(url, variant)
        print(
            f"{variant:8} {insert:6.2f} µs per row inserted, {update:6.2f} µs per row updated "
            f"(median of {ROUNDS} batches of {BATCH})"
        )


if __name__ == "__main__":
    main()
