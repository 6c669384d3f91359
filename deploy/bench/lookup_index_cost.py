"""What the console's search indexes cost each append: single-row INSERTs into a copy of
the mirror table (its indexes, 200,000 entries of one org already there), with no search
index, with the btree (org, column, seq) of the four lookup columns (what migration 0007
builds), and with pg_trgm GIN indexes on the same columns (the alternative measured).

    python deploy/bench/lookup_index_cost.py postgres://postgres@127.0.0.1:5432/DB

Prints the median microseconds per INSERT of each variant (run as a role that may create
tables and, for the GIN variant, the pg_trgm and btree_gin extensions).
"""

from __future__ import annotations

import statistics
import sys
import time

import psycopg

COLUMNS = ("tool_name", "workflow", "rule_id", "agent_identity")
BASE = """
CREATE TEMPORARY TABLE bench_entry (
    id bigserial PRIMARY KEY, org_id bigint NOT NULL, seq bigint NOT NULL,
    action_hash varchar(64) NOT NULL, receipt text NOT NULL, session_id varchar(200),
    session_seq bigint, received_at timestamptz NOT NULL,
    tool_name varchar(200) COLLATE "C", workflow varchar(200) COLLATE "C",
    rule_id varchar(200) COLLATE "C", agent_identity varchar(200) COLLATE "C",
    UNIQUE (org_id, seq), UNIQUE (org_id, action_hash));
CREATE INDEX ON bench_entry (org_id, session_id, session_seq);
CREATE INDEX ON bench_entry (org_id, received_at);
"""
VARIANTS = {
    "none": [],
    "btree": [f"CREATE INDEX ON bench_entry (org_id, {c}, seq)" for c in COLUMNS],
    "trigram": [f"CREATE INDEX ON bench_entry USING gin (org_id, {c} gin_trgm_ops)"
                for c in COLUMNS],
}  # fmt: skip
FILL = 200_000
INSERTS = 5_000


def measure(url: str, variant: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        if variant == "trigram":
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        for statement in BASE.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT INTO bench_entry (org_id, seq, action_hash, receipt, session_id, "
            "session_seq, received_at, tool_name, workflow, rule_id, agent_identity) "
            "SELECT 1, n, md5(n::text) || md5((n + 1)::text), repeat('x', 1300), "
            "'s' || (n / 100), n %% 100, now(), 'tool-' || (n %% 50), 'wf/' || (n %% 20), "
            "'rule-' || (n %% 10), 'agent-' || (n %% 5) FROM generate_series(1, %s) AS n",
            [FILL],
        )
        for statement in VARIANTS[variant]:
            conn.execute(statement)
        conn.execute("ANALYZE bench_entry")
        times = []
        for n in range(FILL + 1, FILL + INSERTS + 1):
            started = time.perf_counter()
            conn.execute(
                "INSERT INTO bench_entry (org_id, seq, action_hash, receipt, session_id, "
                "session_seq, received_at, tool_name, workflow, rule_id, agent_identity) "
                "VALUES (1, %s, md5(%s::text) || md5(%s::text), repeat('x', 1300), %s, %s, "
                "now(), %s, %s, %s, %s)",
                [n, n, n + 1, f"s{n // 100}", n % 100, f"tool-{n % 50}", f"wf/{n % 20}",
                 f"rule-{n % 10}", f"agent-{n % 5}"],
                prepare=True,
            )  # fmt: skip
            times.append(time.perf_counter() - started)
        conn.execute("DROP TABLE bench_entry")
    return statistics.median(times) * 1e6


def main() -> None:
    url = sys.argv[1]
    for variant in VARIANTS:
        print(f"{variant:8} {measure(url, variant):8.1f} µs per INSERT (median of {INSERTS})")


if __name__ == "__main__":
    main()
