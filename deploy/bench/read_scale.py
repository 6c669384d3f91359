#!/usr/bin/env python
"""Every dashboard, console and API read of an org of ``--entries`` entries (default
10,000,000) against the same read of an org of ``--small-entries`` (default 10,000), in one
run, on a fresh PostgreSQL database.

The big org's entries, and those of ``--small-orgs`` orgs of the small size beside it, are
written in bulk as the tables' owner (COPY, the columns taken from the model: see
deploy/bench/bulk_rows.py), with their approvals (one per 100 entries), events and webhook
deliveries (one per 100 entries), org audit events (one per 100 entries), every node of
each org's tree (hashes made up: the routes are timed, not the proofs checked) and a real
published epoch. Each org's newest ``DAY_ENTRIES`` entries were received on the last day
(the evidence export's window, the same size in both orgs); the rest over the year before.

Then each read runs in this process through Django's test client (no network), as the
application role under row-level security, signed in as the org's owner (console pages), a
dashboard session (dashboard API) or the org's SDK key (SDK API): ``--calls`` calls after
``WARMUP`` (at most ``--budget`` seconds a read and org, at least ``MIN_CALLS``), median and
p99, and the ratio of the big org's median to the small one's. A read passes when the ratio
is at most ``MAX_RATIO`` and both p99 are at most ``MAX_P99_MS``.

It also measures the mirror's table and index bytes per receipt
(:func:`storage_per_receipt`); :func:`storage_after` measures the same after a change it is
given (retiring 90% of the bodies, once that exists).

    python deploy/bench/read_scale.py [--entries 10000000] [--small-entries 10000]
        [--small-orgs 3] [--calls 50] [--budget 20] [--reads analytics,receipt_detail,...]
        [--reuse]

``--reuse`` measures an already loaded database again (no new load). Everything runs on
127.0.0.1; every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
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


def storage_per_receipt(owner: Any) -> dict[str, float]:
    """The mirror table's heap (with its TOAST) and index bytes, per stored receipt."""
    with owner.cursor() as cursor:
        cursor.execute(
            "SELECT pg_table_size('receipts_mirrorentry'), "
            "pg_indexes_size('receipts_mirrorentry'), (SELECT sum(size) FROM receipts_mirrorhead)"
        )
        table, indexes, receipts = cursor.fetchone()
    receipts = int(receipts or 0)
    return {
        "receipts": receipts,
        "table_bytes_per_receipt": round(table / max(receipts, 1), 1),
        "index_bytes_per_receipt": round(indexes / max(receipts, 1), 1),
        "total_bytes_per_receipt": round((table + indexes) / max(receipts, 1), 1),
    }


def storage_after(change: Callable[[], object], owner: Any) -> dict[str, float]:
    """:func:`storage_per_receipt` after ``change()`` (e.g. retiring 90% of the bodies) and
    a ``VACUUM`` of the mirror, so what the change freed is counted where it can be
    (detached partitions and truncated pages leave the relation; space a plain VACUUM only
    marks free stays in it, and shows here as not saved)."""
    change()
    owner.commit()
    autocommit = owner.autocommit
    owner.autocommit = True
    try:
        owner.execute("VACUUM (ANALYZE) receipts_mirrorentry")
    finally:
        owner.autocommit = autocommit
    return storage_per_receipt(owner)


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

    def sign_in_again(self) -> None:
        """A fresh dashboard session: its access token is short-lived, the run is not."""
        from apps.tenancy.console_tokens import console_tokens_issue
        from apps.tenancy.org_context import activate_all_orgs

        tokens = console_tokens_issue(user=self.user, org_slug=self.slug)
        activate_all_orgs()
        self.dashboard.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.access}")


def reads(subject: Subject, rng: random.Random) -> dict[str, Callable[[], Any]]:
    """Each read as one call, the detail reads on a random entry or approval each time."""
    from django.urls import NoReverseMatch, reverse

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
        "receipts_search_tool": get(console, f"/admin/receipts/mirrorentry/?org={org}&q=tool-7"),
        "approvals_list": get(console, f"/admin/approvals/approval/?org={org}"),
        "deliveries_list": get(console, f"/admin/events/delivery/?org={org}"),
        "audit_events_list": get(console, f"/admin/tenancy/orgauditevent/?org={org}"),
    }
    with suppress(NoReverseMatch):  # the task results' admin, where the app registers one
        calls["task_results_list"] = get(
            console, reverse("admin:django_tasks_db_dbtaskresult_changelist")
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


def timed(call: Callable[[], Any], calls: int, budget: float) -> tuple[list[float], list[int]]:
    for _ in range(WARMUP):
        call()
    timings, statuses = [], []
    started = time.perf_counter()
    for done in range(calls):
        if done >= MIN_CALLS and time.perf_counter() - started > budget:
            break
        begun = time.perf_counter()
        answer = call()
        timings.append((time.perf_counter() - begun) * 1000)
        statuses.append(getattr(answer, "status_code", 0))
    return timings, statuses


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
    from apps.tenancy.org_context import activate_all_orgs

    activate_all_orgs()
    size = mirror_head_get(org=org).size
    user = get_user_model().objects.get(username=f"{org.slug}-owner")
    console = Client(SERVER_NAME="127.0.0.1")
    console.force_login(user)
    tokens = console_tokens_issue(user=user, org_slug=org.slug)
    activate_all_orgs()
    dashboard = APIClient(SERVER_NAME="127.0.0.1")
    dashboard.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.access}")
    seqs = [rng.randint(1, size) for _ in range(200)]
    entry_pks = list(MirrorEntry.objects.filter(org=org, seq__in=seqs).values_list("pk", flat=True))
    approval_numbers = [rng.randint(1, size // PER_ROW) * PER_ROW for _ in range(200)]
    approvals = Approval.objects.filter(
        org=org, approval_id__in=[f"apr_bench_{org.pk}_{n}" for n in approval_numbers]
    ).values_list("pk", "action_hash")
    sdk = APIClient(SERVER_NAME="127.0.0.1")
    sdk.credentials(HTTP_X_API_KEY=key_file(org.pk).read_text().strip())
    newest = MirrorEntry.objects.filter(org=org, seq=size).values_list("received_at", flat=True)
    last_day = newest[0].date().isoformat()
    return Subject(
        label=label, org_pk=org.pk, size=size, console=console, dashboard=dashboard,
        sdk=sdk, user=user, slug=org.slug, entry_pks=entry_pks,
        approval_pks=[pk for pk, _ in approvals],
        approval_hashes=[hash_ for _, hash_ in approvals], last_day=last_day,
    )  # fmt: skip


def key_file(org_pk: int) -> Path:
    """Where the load step leaves an org's SDK key for the measuring step (shown once)."""
    return Path(f"/tmp/read_scale_key_{org_pk}")  # noqa: S108


def inner_load(args: argparse.Namespace) -> dict[str, object]:
    import psycopg

    from apps.analytics.services import rollups_catch_up
    from apps.tenancy.models import DEFAULT_SCOPES, Plan, Role
    from apps.tenancy.org_context import activate_all_orgs
    from apps.tenancy.services import api_key_issue, membership_add, org_create
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
            key = api_key_issue(org=org, scopes=DEFAULT_SCOPES, label="bench")
            key_file(org.pk).write_text(key.secret)
            load_org(owner, org.pk, size, last_day)
        with owner.cursor() as cursor:
            for table in ("receipts_mirrorentry", "receipts_mirrorhead", "approvals_approval",
                          "events_event", "events_delivery", "tenancy_orgauditevent",
                          "transparency_orgtreenode"):  # fmt: skip
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

    from apps.tenancy.models import Org
    from apps.tenancy.org_context import activate_all_orgs

    # Static file names as they are (no collectstatic manifest here): the pages are timed,
    # not their asset URLs.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    activate_all_orgs()
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
        for label, call in (("small", small_call), ("big", big_call)):
            timings, statuses = timed(call, args.calls, args.budget)
            measured[label] = {
                "median_ms": round(statistics.median(timings), 1),
                "p99_ms": round(p99(timings), 1),
                "calls": len(timings),
                "statuses": sorted(set(statuses)),
            }
        ratio = measured["big"]["median_ms"] / max(measured["small"]["median_ms"], 0.01)
        passed = ratio <= MAX_RATIO and max(m["p99_ms"] for m in measured.values()) <= MAX_P99_MS
        rows.append({"read": name, **measured, "ratio": round(ratio, 2), "pass": passed})
        print(json.dumps(rows[-1]), file=sys.stderr)
    with psycopg.connect(args.owner_url) as owner:
        storage = storage_per_receipt(owner)
    return {"entries": big.size, "small_entries": small.size, "reads": rows, "storage": storage}


def table(result: dict[str, Any]) -> str:
    lines = [
        f"{'read':28} {'small med':>9} {'small p99':>9} {'big med':>9} {'big p99':>9} "
        f"{'ratio':>6}  pass",
    ]
    for row in result["reads"]:
        small, big = row["small"], row["big"]
        lines.append(
            f"{row['read']:28} {small['median_ms']:9.1f} {small['p99_ms']:9.1f} "
            f"{big['median_ms']:9.1f} {big['p99_ms']:9.1f} {row['ratio']:6.2f}  "
            f"{'yes' if row['pass'] else 'NO'}"
            + ("" if big["statuses"] == [200] else f"  (statuses {big['statuses']})")
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
    parser.add_argument("--reads", default="", help="comma-separated read names (default all)")
    parser.add_argument("--reuse", action="store_true", help="measure an already loaded database")
    parser.add_argument("--inner", choices=["load", "measure"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.inner:
        import django

        django.setup()
        result = inner_load(args) if args.inner == "load" else inner_measure(args)
        print(json.dumps(result))
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
        manage(env, "migrate", "--noinput")
    passed = ["--database-url", args.database_url, "--owner-url", args.owner_url,
              "--entries", str(args.entries), "--small-entries", str(args.small_entries),
              "--small-orgs", str(args.small_orgs), "--calls", str(args.calls),
              "--budget", str(args.budget), "--reads", args.reads]  # fmt: skip
    for part in ["measure"] if args.reuse else ["load", "measure"]:
        done = subprocess.run(
            [PY, __file__, "--inner", part, *passed],
            cwd=ROOT,
            env={**env, "ORG_CONTEXT_DEFAULT": "all"} if part == "load" else env,
            stdout=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the {part} step failed")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if part == "load":
            print("load:", json.dumps(result))
        else:
            print(table(result))
            print("storage:", json.dumps(result["storage"]))
            print("json:", json.dumps(result))


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    main()
