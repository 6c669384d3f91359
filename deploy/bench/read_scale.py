#!/usr/bin/env python
"""Every dashboard, console and API read of an org of ``--entries`` entries (default
10,000,000) against the same read of an org of ``--small-entries`` (default 10,000), in one
run, on a PostgreSQL database of its own (created afresh unless ``--reuse``).

The big org's entries, and those of ``--small-orgs`` orgs of the small size beside it, are
written in bulk as the tables' owner (COPY, the columns taken from the model: see
deploy/bench/bulk_rows.py), with their approvals (one per 100 entries), events and webhook
deliveries (one per 100 entries), org audit events (one per 100 entries), every node of
each org's tree (hashes made up: the routes are timed, not the proofs checked), a real
published epoch, the dashboard rollups folded, and the deployment's finished task results
(one per 100 entries of all orgs). Each org's newest ``DAY_ENTRIES`` entries were received
on the last day (the evidence export's window, the same size in both orgs); the rest over
the year before.

Before measuring, as a worker and autovacuum would have by then: the rollups are caught up
(``rollups_catch_up``) and the database is vacuumed and analysed (quick once done).
Then each read runs in this process through Django's test client (no network), as the
application role under row-level security, signed in as the org's owner (console pages; the
reads named ``*_operator`` as a console superuser, who sees every org's rows: the task
results, the deployment's, and two of the org's pages again), a dashboard session (dashboard API)
or an SDK key the run issues (SDK API): ``--calls`` calls of each org's read in turn (small,
big, small, …) after ``WARMUP`` (at least ``MIN_CALLS``, at most ``--budget`` seconds a read
and org), median and p99, and the ratio of the big org's median to the small one's. A read
passes when the ratio is at most ``MAX_RATIO`` and both p99 are at most ``MAX_P99_MS``. Each
read is also run once more with every SELECT replayed under ``EXPLAIN (ANALYZE, BUFFERS)``
in the org's context: the pages it touches, a count the machine's load does not move, which
grows with the org only where a statement reads rows in proportion to it (``pages_read``).

Last, the mirror table's bytes per receipt (heap, TOAST, indexes, total; ``--no-storage``
skips it): as loaded, right after retiring the oldest 90% of the big org's bodies with the
real service (``mirror_bodies_retire``, through ``retention_bench.retire_fraction``), and
after a plain ``VACUUM``, with the free space it left in the pages. This runs on a copy of
the database (``<name>_retire``, made with ``CREATE DATABASE … TEMPLATE``, dropped after),
so the loaded database keeps its bodies and can be measured again.

Load once (about 30 minutes at 10,000,000 on two shared cores; 18 GB), then measure, now
or later, as often as wanted:

    python deploy/bench/read_scale.py --entries 10000000 --load-only \
        --database-url postgres://mirror_app@127.0.0.1:5432/mirror_bench \
        --owner-url postgres://postgres@127.0.0.1:5432/mirror_bench
    python deploy/bench/read_scale.py --reuse \
        --database-url postgres://mirror_app@127.0.0.1:5432/mirror_bench \
        --owner-url postgres://postgres@127.0.0.1:5432/mirror_bench

Other flags: ``[--small-entries 10000] [--small-orgs 3] [--calls 50] [--budget 20]
[--reads analytics_api,receipt_detail,…|none] [--no-storage]``. Without ``--reuse`` and
``--load-only`` one run loads and measures. Everything runs on 127.0.0.1; every loop is
bounded by count and time.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from deploy.bench.push_load import PY, env_for, fresh_database, manage  # noqa: E402
from deploy.bench.transparency_bench import action_hash  # noqa: E402

MAX_RATIO = 1.5
MAX_P99_MS = 150.0
WARMUP = 3
MIN_CALLS = 5
# Entries received on the last day, in every org: the evidence export's window.
DAY_ENTRIES = 1_000
# One approval, one event (with its delivery) and one org audit event per this many entries.
PER_ROW = 100
SESSION_LENGTH = 10
COPY_BATCH = 1_000_000


# --- loading ------------------------------------------------------------------------------


def receipt_text(org_pk: int, seq: int) -> str:
    """A stored receipt of a plausible shape and about 450 bytes (what the pages decode)."""
    return json.dumps(
        {
            "content": {
                "action": {
                    "verb": "call",
                    "tool_name": f"tool-{seq % 50}",
                    "target_host": f"api{seq % 7}.example.com",
                    "workflow": f"wf-{seq % 20}",
                    "fields": {"ticket": f"T-{seq}", "amount": seq % 1000},
                },
                "policy": {"decision_path": "allow", "rule_id": f"rule-{seq % 30}"},
                "session_id": f"s{seq // SESSION_LENGTH}",
                "seq": seq % SESSION_LENGTH,
                "trust_level": "L1" if seq % 7 == 0 else "L0",
                "agent_identity": f"agent-{seq % 5}",
                "captured_at": "2026-01-01T00:00:00Z",
            },
            "signatures": [{"key_id": "k1", "public_key": "A" * 43 + "=", "sig": "B" * 86}],
            "org": org_pk,
        },
        separators=(",", ":"),
    )


def received_at(seq: int, size: int, last_day: datetime) -> datetime:
    """The newest ``DAY_ENTRIES`` on ``last_day``, the others over the 364 days before."""
    recent = size - min(DAY_ENTRIES, size)
    if seq > recent:
        return last_day + timedelta(seconds=(seq - recent) * 86_000 / DAY_ENTRIES)
    return last_day - timedelta(days=364) + timedelta(seconds=seq * 364 * 86_400 / (recent + 1))


def entry_rows(
    org_pk: int, start: int, stop: int, size: int, last_day: datetime
) -> Iterator[dict[str, Any]]:
    zero = "0" * 64
    for seq in range(start, stop):
        own = action_hash(org_pk, seq).hex()
        yield {
            "org_id": org_pk,
            "seq": seq,
            "action_hash": own,
            "receipt": receipt_text(org_pk, seq),
            "receipt_digest": own,
            "trust_level": "L1" if seq % 7 == 0 else "L0",
            "supersedes_action_hash": action_hash(org_pk, seq - 1).hex() if seq % 7 == 0 else "",
            "prev_chain_hash": zero,
            "chain_hash": zero,
            "received_at": received_at(seq, size, last_day),
            "session_id": f"s{seq // SESSION_LENGTH}",
            "session_seq": seq % SESSION_LENGTH,
            "link_hash": zero,
            "agent_identity": f"agent-{seq % 5}",
            "workflow": f"wf-{seq % 20}",
            "verb": "call",
            "decision_path": "allow",
            "rule_id": f"rule-{seq % 30}",
            "tool_name": f"tool-{seq % 50}",
        }


def load_org(owner: Any, org_pk: int, size: int, last_day: datetime) -> None:
    """An org's entries (COPY), head, approvals, events, deliveries, audit events and tree."""
    from apps.approvals.models import Approval
    from apps.events.models import Delivery, Event, WebhookEndpoint
    from apps.receipts.models import MirrorEntry
    from apps.tenancy.models import OrgAuditEvent
    from deploy.bench.bulk_rows import copy_rows, insert_select

    with owner.cursor() as cursor:
        for start in range(1, size + 1, COPY_BATCH):
            stop = min(start + COPY_BATCH, size + 1)
            copy_rows(cursor, MirrorEntry, entry_rows(org_pk, start, stop, size, last_day))
            owner.commit()
            print(f"  org {org_pk}: {stop - 1:,} of {size:,} entries", file=sys.stderr)
        cursor.execute(
            "INSERT INTO receipts_mirrorhead (org_id, size, head, month, month_count) "
            "VALUES (%s, %s, %s, '', 0) ON CONFLICT (org_id) DO UPDATE SET size = EXCLUDED.size",
            [org_pk, size, "0" * 64],
        )
        series = f"generate_series({PER_ROW}, {size}, {PER_ROW}) AS n"
        entry_hash = f"encode(sha256(('bench {org_pk} ' || n)::bytea), 'hex')"
        insert_select(cursor, Approval, {
            "org_id": str(org_pk),
            "approval_id": f"'apr_bench_{org_pk}_' || n",
            "action_hash": entry_hash,
            "ticket_hash": f"encode(sha256(('ticket {org_pk} ' || n)::bytea), 'hex')",
            "status": "CASE WHEN mod(n / 100, 2) = 0 THEN 'approved' ELSE 'pending' END",
            "rule_id": "'rule-' || mod(n, 30)",
            "session_id": f"'s' || (n / {SESSION_LENGTH})",
            "session_seq": f"mod(n, {SESSION_LENGTH})",
            "created_at": "now() - (%s - n) * interval '1 second'",
            "resolved_at": "CASE WHEN mod(n / 100, 2) = 0 THEN now() END",
        }, series, [size])  # fmt: skip
        insert_select(cursor, WebhookEndpoint, {
            "org_id": str(org_pk),
            "endpoint_id": f"'wh_bench_{org_pk}'",
            "url": "'https://hooks.example.com/bench'",
            "secret": "'whsec_bench'",
            "created_at": "now()",
        }, "(SELECT 1) AS one")  # fmt: skip
        insert_select(cursor, Event, {
            "org_id": str(org_pk),
            "event_id": f"'evt_bench_{org_pk}_' || n",
            "type": "'approval.requested'",
            "payload": "'{}'::jsonb",
            "created_at": "now() - (%s - n) * interval '1 second'",
        }, series, [size])  # fmt: skip
        insert_select(cursor, Delivery, {
            "org_id": str(org_pk),
            "endpoint_id": "w.id",
            "event_id": "e.id",
            "status": "'delivered'",
            "attempts": "1",
            "next_attempt_at": "e.created_at",
            "delivered_at": "e.created_at",
            "created_at": "e.created_at",
        }, "events_event e JOIN events_webhookendpoint w ON w.org_id = e.org_id "
           "WHERE e.org_id = %s", [org_pk])  # fmt: skip
        insert_select(cursor, OrgAuditEvent, {
            "org_id": str(org_pk),
            "at": "now() - (%s - n) * interval '1 second'",
            "kind": "'api_key_issued'",
            "summary": "'bench'",
            "via": "'command'",
        }, series, [size])  # fmt: skip
        made_up_tree(cursor, org_pk, size)
    owner.commit()


def task_results_seed(owner: Any) -> int:
    """Finished task results (deliveries, exports, sweeps a worker ran), one per
    ``PER_ROW`` entries of all orgs, six seconds apart; only the rows missing are written
    (a database loaded before this step gets them when it is measured).
    The table is the deployment's, not an org's: both orgs' consoles list the same rows."""
    from django_tasks_db.models import DBTaskResult

    from deploy.bench.bulk_rows import insert_select

    with owner.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT coalesce(sum(size), 0) FROM receipts_mirrorhead) / %s "  # noqa: S608
            f"- (SELECT count(*) FROM {DBTaskResult._meta.db_table})",
            [PER_ROW],
        )
        missing = int(cursor.fetchone()[0])
        if missing > 0:
            at = "now() - n * interval '6 seconds'"
            insert_select(cursor, DBTaskResult, {
                "id": "gen_random_uuid()",
                "status": "'SUCCESSFUL'",
                "args_kwargs": "'{\"args\": [], \"kwargs\": {}}'::jsonb",
                "priority": "0",
                "task_path": "'apps.events.tasks.deliver_webhook'",
                "queue_name": "'default'",
                "backend_name": "'default'",
                "run_after": at,
                "enqueued_at": at,
                "started_at": at,
                "finished_at": at,
                "return_value": "'null'::jsonb",
                "exception_class_path": "''",
                "traceback": "''",
                "worker_ids": "'[\"bench\"]'::jsonb",
            }, "generate_series(1, %s) AS n", [missing])  # fmt: skip
    owner.commit()
    return max(missing, 0)


def vacuum_analyze(owner_url: str) -> None:
    """``VACUUM (ANALYZE)`` of the whole database, what autovacuum would have done by the
    time an org is this old: the rollup rows the load's triggers rewrote many times in one
    transaction lose their dead versions, and the mirror's pages are marked all-visible
    (the search's index-only scans depend on it). Quick once done: a page still
    all-visible is skipped."""
    import psycopg

    with psycopg.connect(owner_url, autocommit=True) as owner:
        owner.execute("VACUUM (ANALYZE)")


def made_up_tree(cursor: Any, org_pk: int, size: int) -> None:
    """Every node of an org tree of ``size`` leaves, hashes made up, and its ``OrgLog`` at
    that size (so the next epoch publishes it)."""
    level = 0
    while size >> level:
        cursor.execute(
            "INSERT INTO transparency_orgtreenode (org_id, level, index, hash) "
            "SELECT %s, %s, i, sha256(('node ' || %s || ' ' || %s || ' ' || i)::bytea) "
            "FROM generate_series(0, %s) AS i",
            [org_pk, level, org_pk, level, (size >> level) - 1],
        )
        level += 1
    cursor.execute(
        "UPDATE transparency_orglog SET tree_size = %s, tree_root = sha256('root'::bytea) "
        "WHERE org_id = %s",
        [size, org_pk],
    )


# --- storage ------------------------------------------------------------------------------


STORAGE_SQL = """
SELECT pg_relation_size(c.oid), coalesce(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),
       pg_indexes_size(c.oid), pg_total_relation_size(c.oid),
       (SELECT sum(size) FROM receipts_mirrorhead)
FROM pg_class c WHERE c.oid = 'receipts_mirrorentry'::regclass
"""


def storage_per_receipt(owner: Any, step: str) -> dict[str, Any]:
    """The mirror table's bytes per stored receipt (every org's): its heap, its TOAST (with
    the TOAST index), its indexes, and the whole (``pg_total_relation_size``)."""
    with owner.cursor() as cursor:
        cursor.execute(STORAGE_SQL)
        heap, toast, indexes, total, receipts = cursor.fetchone()
    owner.commit()  # no transaction left open: VACUUM may remove what it would see
    receipts = int(receipts or 0)
    per = max(receipts, 1)
    return {
        "step": step,
        "receipts": receipts,
        "heap_mb": round(heap / 2**20, 1),
        "toast_mb": round(toast / 2**20, 1),
        "indexes_mb": round(indexes / 2**20, 1),
        "total_mb": round(total / 2**20, 1),
        "heap_per_receipt": round(heap / per, 1),
        "toast_per_receipt": round(toast / per, 1),
        "index_per_receipt": round(indexes / per, 1),
        "total_per_receipt": round(total / per, 1),
    }


def pages_content(owner: Any) -> dict[str, float]:
    """What the mirror's heap pages hold: its live rows' bytes (``pgstattuple_approx``,
    which reads only the pages not marked all-visible) and the space the free space map
    records, which a plain ``VACUUM`` freed inside the pages and the next appends fill
    before the file grows."""
    with owner.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_freespacemap")
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        cursor.execute("SELECT coalesce(sum(avail), 0) FROM pg_freespace('receipts_mirrorentry')")
        (free,) = cursor.fetchone()
        cursor.execute("SELECT approx_tuple_len FROM pgstattuple_approx('receipts_mirrorentry')")
        (live,) = cursor.fetchone()
    owner.commit()
    return {"live_mb": round(int(live) / 2**20, 1), "free_mb": round(int(free) / 2**20, 1)}


def storage_after(
    change: Callable[[], object], owner: Any, step: str = "after the change and VACUUM"
) -> dict[str, Any]:
    """:func:`storage_per_receipt` after ``change()`` (retiring 90% of the bodies) and a
    plain ``VACUUM`` of the mirror (what autovacuum does; no lock that stops the append):
    what the change freed shows as smaller files only where pages at the table's end became
    empty; space freed inside pages stays in the files: ``live_mb`` and ``free_mb`` say
    how much (:func:`pages_content`)."""
    change()
    owner.commit()
    autocommit = owner.autocommit
    owner.autocommit = True
    try:
        owner.execute("VACUUM (ANALYZE) receipts_mirrorentry")
    finally:
        owner.autocommit = autocommit
    return {**storage_per_receipt(owner, step), **pages_content(owner)}


def inner_retire(args: argparse.Namespace) -> list[dict[str, Any]]:
    """On a copy of the loaded database: the mirror's bytes per receipt as loaded, right
    after retiring the oldest 90% of the big org's bodies with the real service (batched
    UPDATEs as the application role), and after a plain ``VACUUM``."""
    import psycopg

    from apps.tenancy.models import Org
    from apps.tenancy.org_context import activate_all_orgs
    from deploy.bench.retention_bench import retire_fraction

    activate_all_orgs()
    big = Org.objects.get(slug="big")
    steps: list[dict[str, Any]] = []
    timing: dict[str, float] = {}

    def retire() -> None:
        started = time.perf_counter()
        timing["retired"] = retire_fraction(big, 0.9)
        timing["seconds"] = round(time.perf_counter() - started, 1)
        steps.append(
            {**storage_per_receipt(owner, "90% of the big org's bodies retired"), **timing}
        )

    with psycopg.connect(args.owner_url) as owner:
        steps.append({**storage_per_receipt(owner, "loaded"), **pages_content(owner)})
        steps.append(storage_after(retire, owner, "after a plain VACUUM"))
    return steps


# --- reads --------------------------------------------------------------------------------


@dataclass
class Subject:
    """An org as the reads see it: its callers and what the detail reads pick among."""

    label: str
    org_pk: int
    size: int
    console: Any
    dashboard: Any
    sdk: Any
    entry_pks: list[int]
    approval_pks: list[int]
    approval_hashes: list[str]
    last_day: str
    user: Any = None
    slug: str = ""
    operator: Any = None  # a console superuser (the deployment's own pages)

    def sign_in_again(self) -> None:
        """A fresh dashboard session: its access token is short-lived, the run is not."""
        from apps.tenancy.console_tokens import console_tokens_issue
        from apps.tenancy.org_context import activate_all_orgs

        tokens = console_tokens_issue(user=self.user, org_slug=self.slug)
        activate_all_orgs()
        self.dashboard.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.access}")


def reads(subject: Subject, rng: random.Random) -> dict[str, Callable[[], Any]]:
    """Each read as one call, the detail reads on a random entry or approval each time."""
    from django.urls import reverse

    console, dashboard, sdk, org = subject.console, subject.dashboard, subject.sdk, subject.org_pk

    def get(client: Any, url: str, **headers: Any) -> Callable[[], Any]:
        return lambda: client.get(url() if callable(url) else url, **headers)

    def export() -> Any:
        day = subject.last_day
        answer = dashboard.post("/v1/evidence/export", {"from": day, "to": day}, format="json")
        first = next(iter(answer.streaming_content))
        answer.close()
        return answer if first else None

    calls: dict[str, Callable[[], Any]] = {
        "analytics_api": get(dashboard, "/v1/analytics"),
        "console_org_dashboard": get(console, reverse("admin:tenancy_org_dashboard", args=[org])),
        "receipts_list": get(console, f"/admin/receipts/mirrorentry/?org={org}"),
        "receipts_search_tool": get(console, f"/admin/receipts/mirrorentry/?org={org}&q=tool-1"),
        "approvals_list": get(console, f"/admin/approvals/approval/?org={org}"),
        "deliveries_list": get(console, f"/admin/events/delivery/?org={org}"),
        "audit_events_list": get(console, f"/admin/tenancy/orgauditevent/?org={org}"),
    }
    # The deployment's task results (no org's own, an operator's page): the same table in
    # both columns.
    calls["task_results_list_operator"] = get(
        subject.operator, reverse("admin:django_tasks_database_dbtaskresult_changelist")
    )
    # An operator (console superuser: every org's rows) on the same org's pages.
    calls["console_org_dashboard_operator"] = get(
        subject.operator, reverse("admin:tenancy_org_dashboard", args=[org])
    )
    calls["audit_events_list_operator"] = get(
        subject.operator, f"/admin/tenancy/orgauditevent/?org={org}"
    )
    calls.update(
        {
            "receipt_detail": get(
                console,
                lambda: f"/admin/receipts/mirrorentry/{rng.choice(subject.entry_pks)}/change/",
            ),
            "approval_detail_console": get(
                console,
                lambda: f"/admin/approvals/approval/{rng.choice(subject.approval_pks)}/change/",
            ),
            "approval_detail_api": get(
                sdk, lambda: f"/v1/approvals/{rng.choice(subject.approval_hashes)}"
            ),
            "audit_chain_window": get(
                dashboard,
                lambda: f"/v1/audit/chain?limit=100&before={rng.randint(2, subject.size + 1)}",
            ),
            "proof": get(
                sdk,
                lambda: (
                    f"/v1/receipts/{action_hash(org, rng.randint(1, subject.size)).hex()}/proof"
                ),
            ),
            "evidence_export_first_byte": export,
        }
    )
    return calls


def timed_interleaved(
    calls_of: dict[str, Callable[[], Any]], calls: int, budget: float
) -> dict[str, tuple[list[float], list[int]]]:
    """Each org's call in turn (small, big, small, …), so a machine whose load moves
    during the run moves both orgs' figures alike; ``calls`` each, or fewer (at least
    ``MIN_CALLS``) once ``budget`` seconds a read and org have passed."""
    # As each gunicorn worker does once the application is loaded (deploy/gunicorn.conf.py,
    # post_worker_init): what start-up allocated leaves the cyclic collector's reach, whose
    # full passes over it otherwise stall one request in fifty by 100 ms and more.
    gc.collect()
    gc.freeze()
    for _ in range(WARMUP):
        for call in calls_of.values():
            call()
    measured: dict[str, tuple[list[float], list[int]]] = {label: ([], []) for label in calls_of}
    started = time.perf_counter()
    for done in range(calls):
        if done >= MIN_CALLS and time.perf_counter() - started > budget * len(calls_of):
            break
        for label, call in calls_of.items():
            begun = time.perf_counter()
            answer = call()
            measured[label][0].append((time.perf_counter() - begun) * 1000)
            measured[label][1].append(getattr(answer, "status_code", 0))
    return measured


def pages_read(call: Callable[[], Any], org_pk: int | None) -> dict[str, Any]:
    """The shared buffers (8 kB pages, from cache or disk) the read's SELECT statements
    touch, each run again under ``EXPLAIN (ANALYZE, BUFFERS)`` right after one call, in the
    org context of its request (the org's member sees that org's rows; ``None``: an
    operator, every org's): a count the machine's load does not move, which grows with the
    org only where a statement visits rows in proportion to it. With the statement that
    touched most."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.tenancy.org_context import activate_all_orgs, activate_orgs

    with CaptureQueriesContext(connection) as captured:
        call()
    if org_pk is None:
        activate_all_orgs()
    else:
        activate_orgs([org_pk])
    total, worst, worst_sql = 0, 0, ""
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"] or ""
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            top = plan[0]["Plan"]
            pages = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
            total += pages
            if pages > worst:
                worst, worst_sql = pages, sql[:300]
    activate_all_orgs()
    return {"pages": total, "statements": len(captured.captured_queries),
            "worst_pages": worst, "worst_sql": worst_sql}  # fmt: skip


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def subject_for(org: Any, label: str, rng: random.Random) -> Subject:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework.test import APIClient

    from apps.approvals.models import Approval
    from apps.receipts.models import MirrorEntry
    from apps.receipts.selectors import mirror_head_get
    from apps.tenancy.console_tokens import console_tokens_issue
    from apps.tenancy.models import DEFAULT_SCOPES
    from apps.tenancy.org_context import activate_all_orgs
    from apps.tenancy.services import api_key_issue

    activate_all_orgs()
    size = mirror_head_get(org=org).size
    user = get_user_model().objects.get(username=f"{org.slug}-owner")
    console = Client(SERVER_NAME="127.0.0.1")
    console.force_login(user)
    tokens = console_tokens_issue(user=user, org_slug=org.slug)
    activate_all_orgs()
    dashboard = APIClient(SERVER_NAME="127.0.0.1")
    dashboard.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.access}")
    operator = Client(SERVER_NAME="127.0.0.1")
    superuser = get_user_model().objects.filter(username="bench-operator").first()
    operator.force_login(
        superuser or get_user_model().objects.create_superuser("bench-operator", "", None)
    )
    seqs = [rng.randint(1, size) for _ in range(200)]
    entry_pks = list(MirrorEntry.objects.filter(org=org, seq__in=seqs).values_list("pk", flat=True))
    approval_numbers = [rng.randint(1, size // PER_ROW) * PER_ROW for _ in range(200)]
    approvals = Approval.objects.filter(
        org=org, approval_id__in=[f"apr_bench_{org.pk}_{n}" for n in approval_numbers]
    ).values_list("pk", "action_hash")
    # A key of its own each run (an SDK key is shown once): a later --reuse needs no file
    # the load left behind.
    key = api_key_issue(org=org, scopes=DEFAULT_SCOPES, label="read_scale measure")
    activate_all_orgs()
    sdk = APIClient(SERVER_NAME="127.0.0.1")
    sdk.credentials(HTTP_X_API_KEY=key.secret)
    newest = MirrorEntry.objects.filter(org=org, seq=size).values_list("received_at", flat=True)
    last_day = newest[0].date().isoformat()
    return Subject(
        label=label, org_pk=org.pk, size=size, console=console, dashboard=dashboard,
        operator=operator,
        sdk=sdk, user=user, slug=org.slug, entry_pks=entry_pks,
        approval_pks=[pk for pk, _ in approvals],
        approval_hashes=[hash_ for _, hash_ in approvals], last_day=last_day,
    )  # fmt: skip


def inner_load(args: argparse.Namespace) -> dict[str, object]:
    import psycopg

    from apps.analytics.services import rollups_catch_up
    from apps.tenancy.models import Plan, Role
    from apps.tenancy.org_context import activate_all_orgs
    from apps.tenancy.services import membership_add, org_create
    from apps.transparency.services import transparency_publish_epoch

    activate_all_orgs()
    # The last day is yesterday (UTC): the dashboards' recent days hold the newest entries.
    last_day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    last_day -= timedelta(days=1)
    sizes = {
        "big": args.entries,
        **{f"small-{i}": args.small_entries for i in range(args.small_orgs)},
    }
    started = time.perf_counter()
    with psycopg.connect(args.owner_url) as owner:
        for slug, size in sizes.items():
            org = org_create(slug=slug, name=slug, plan=Plan.CUSTOM)
            membership_add(org=org, username=f"{slug}-owner", role=Role.OWNER)
            load_org(owner, org.pk, size, last_day)
        task_results_seed(owner)
        with owner.cursor() as cursor:
            for table in ("receipts_mirrorentry", "receipts_mirrorhead", "approvals_approval",
                          "events_event", "events_delivery", "tenancy_orgauditevent",
                          "transparency_orgtreenode",
                          "django_tasks_database_dbtaskresult"):  # fmt: skip
                cursor.execute(f"ANALYZE {table}")
        owner.commit()
    epoch = transparency_publish_epoch()
    # The dashboard counters' rollups, caught up as the worker keeps them.
    folded = 0
    while caught := rollups_catch_up(batch=1_000_000):
        folded += caught
    return {
        "orgs": sizes,
        "load_seconds": round(time.perf_counter() - started, 1),
        "epoch_published": bool(epoch.published),
        "entries_folded": folded,
    }


def inner_measure(args: argparse.Namespace) -> dict[str, object]:
    import psycopg
    from django.conf import settings

    from apps.analytics.services import rollups_catch_up
    from apps.tenancy.models import Org
    from apps.tenancy.org_context import activate_all_orgs

    # Static file names as they are (no collectstatic manifest here): the pages are timed,
    # not their asset URLs.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    activate_all_orgs()
    # The dashboard counters' rollups caught up first, as the worker keeps them (a --reuse
    # run may find entries or approvals the last fold did not see).
    while rollups_catch_up(batch=1_000_000):
        pass
    with psycopg.connect(args.owner_url) as owner:
        task_results_seed(owner)
    vacuum_analyze(args.owner_url)
    rng = random.Random(7)
    big = subject_for(Org.objects.get(slug="big"), "big", rng)
    small = subject_for(Org.objects.get(slug="small-0"), "small", rng)
    wanted = set(args.reads.split(",")) if args.reads else None
    rows = []
    for name, big_call in reads(big, rng).items():
        if wanted and name not in wanted:
            continue
        small_call = reads(small, rng)[name]
        measured = {}
        big.sign_in_again()
        small.sign_in_again()
        timings = timed_interleaved({"small": small_call, "big": big_call}, args.calls, args.budget)
        for label, (times, statuses) in timings.items():
            measured[label] = {
                "median_ms": round(statistics.median(times), 1),
                "p99_ms": round(p99(times), 1),
                "calls": len(times),
                "statuses": sorted(set(statuses)),
            }
        operator = name.endswith("_operator")
        for label, call, org_pk in (("small", small_call, small.org_pk),
                                    ("big", big_call, big.org_pk)):  # fmt: skip
            measured[label].update(pages_read(call, None if operator else org_pk))
        ratio = measured["big"]["median_ms"] / max(measured["small"]["median_ms"], 0.01)
        passed = ratio <= MAX_RATIO and max(m["p99_ms"] for m in measured.values()) <= MAX_P99_MS
        rows.append({"read": name, **measured, "ratio": round(ratio, 2), "pass": passed})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return {"entries": big.size, "small_entries": small.size, "reads": rows}


def table(result: dict[str, Any]) -> str:
    """The reads as a Markdown table (what docs/performance/reads.md quotes)."""
    lines = [
        "| read | small median | small p99 | big median | big p99 | ratio | pages small / big "
        "| pass |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["reads"]:
        small, big = row["small"], row["big"]
        statuses = "" if big["statuses"] == [200] else f" (statuses {big['statuses']})"
        lines.append(
            f"| {row['read']} | {small['median_ms']:.1f} | {small['p99_ms']:.1f} "
            f"| {big['median_ms']:.1f} | {big['p99_ms']:.1f} | {row['ratio']:.2f} "
            f"| {small.get('pages', 0):,} / {big.get('pages', 0):,} "
            f"| {'yes' if row['pass'] else 'no'}{statuses} |"
        )
    return "\n".join(lines)


def storage_table(steps: list[dict[str, Any]]) -> str:
    lines = [
        "| step | receipts | heap | TOAST | indexes | total | heap / receipt "
        "| indexes / receipt | total / receipt | live rows in the heap | free in its pages |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step in steps:
        note = (
            f" ({step['retired']:,} bodies, {step['seconds']:.0f} s)" if "retired" in step else ""
        )
        free = f"{step['free_mb']:,.0f} MB" if "free_mb" in step else "-"
        live = f"{step['live_mb']:,.0f} MB" if "live_mb" in step else "-"
        lines.append(
            f"| {step['step']}{note} | {step['receipts']:,} | {step['heap_mb']:,.0f} MB "
            f"| {step['toast_mb']:,.0f} MB | {step['indexes_mb']:,.0f} MB "
            f"| {step['total_mb']:,.0f} MB | {step['heap_per_receipt']:,.0f} B "
            f"| {step['index_per_receipt']:,.0f} B | {step['total_per_receipt']:,.0f} B | {live} "
            f"| {free} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://mirror_app@127.0.0.1:5432/read_scale_bench"
    )
    parser.add_argument(
        "--owner-url", default="postgres://postgres@127.0.0.1:5432/read_scale_bench"
    )
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--small-entries", type=int, default=10_000)
    parser.add_argument("--small-orgs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds per read and org")
    parser.add_argument(
        "--reads", default="", help="comma-separated read names (default all; none: no reads)"
    )
    parser.add_argument("--reuse", action="store_true", help="measure an already loaded database")
    parser.add_argument("--load-only", action="store_true", help="load, measure nothing")
    parser.add_argument(
        "--no-storage", action="store_true", help="no retirement, no bytes per receipt"
    )
    parser.add_argument("--inner", choices=["load", "measure", "retire"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.inner:
        import django

        django.setup()
        steps = {"load": inner_load, "measure": inner_measure, "retire": inner_retire}
        print(json.dumps(steps[args.inner](args)))
        return

    env = env_for(args.database_url, 0, 1)
    env.update(
        # Fixed, so the API keys a load stored (keyed digests) still verify with --reuse.
        DJANGO_SECRET_KEY="read-scale-bench-" + "k" * 50,
        MIGRATION_DATABASE_URL=args.owner_url,
        ALLOWED_HOSTS="127.0.0.1",
        DASHBOARD_RATE_PER_MINUTE="100000000",
        DASHBOARD_RATE_BURST="100000",
        DB_STATEMENT_TIMEOUT_MS="0",
    )
    env.pop("REDIS_URL", None)  # one process: the limiter's buckets in local memory
    if not args.reuse:
        fresh_database(args.owner_url)
    # A reused database is brought up to this checkout's schema first (a no-op when it is).
    manage(env, "migrate", "--noinput")
    passed = ["--database-url", args.database_url, "--owner-url", args.owner_url,
              "--entries", str(args.entries), "--small-entries", str(args.small_entries),
              "--small-orgs", str(args.small_orgs), "--calls", str(args.calls),
              "--budget", str(args.budget), "--reads", args.reads]  # fmt: skip
    if not args.reuse:
        print("load:", json.dumps(inner_step(env, "load", passed)), flush=True)
    if args.load_only:
        return
    if args.reads != "none":
        result = inner_step(env, "measure", passed)
        print(f"reads ({result['entries']:,} entries against {result['small_entries']:,}):")
        print(table(result), flush=True)
        print("json:", json.dumps(result), flush=True)
    if not args.no_storage:
        print("storage (the mirror table, bytes per receipt of every org):", flush=True)
        steps = storage_on_copy(env, passed, args.owner_url)
        print(storage_table(steps))
        print("storage json:", json.dumps(steps), flush=True)


def inner_step(env: dict[str, str], part: str, passed: list[str]) -> Any:
    done = subprocess.run(
        [PY, __file__, "--inner", part, *passed],
        cwd=ROOT,
        env={**env, "ORG_CONTEXT_DEFAULT": "all"} if part != "measure" else env,
        stdout=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {part} step failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def other_database(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


def storage_on_copy(env: dict[str, str], passed: list[str], owner_url: str) -> list[Any]:
    """Retire on a copy of the loaded database (``<name>_retire``, dropped after), so the
    loaded one keeps its bodies and ``--reuse`` measures the same org again."""
    import psycopg

    name = owner_url.rsplit("/", 1)[1]
    copy = f"{name}_retire"
    admin_url = owner_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
        # FILE_COPY: the files copied after a checkpoint, not written again through the WAL.
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}" STRATEGY FILE_COPY')
    try:
        at_copy = [other_database(part, copy) if "://" in part else part for part in passed]
        copy_env = {**env, **{key: other_database(env[key], copy)
                              for key in ("DATABASE_URL", "MIGRATION_DATABASE_URL")}}  # fmt: skip
        return list(inner_step(copy_env, "retire", at_copy))
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    main()
