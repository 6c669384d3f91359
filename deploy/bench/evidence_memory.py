#!/usr/bin/env python
"""Peak memory of the evidence export (POST /v1/evidence/export) against the window's size.

    python deploy/bench/evidence_memory.py [--sizes 1000,100000] \
        [--database-url postgres://mirror_app@127.0.0.1:5432/mirror_evidence_bench] \
        [--owner-url postgres://postgres@127.0.0.1:5432/mirror_evidence_bench]

On a fresh PostgreSQL database (dropped and created, migrated as --owner-url), fills one
org per size with that many mirrored receipts: real signed receipts (about 1.5 KB, in
agent sessions of 50, every 100th with an approval) bulk-inserted with their real chain
hashes. Then, for each size, a fresh process downloads the org's evidence export through
the API as an auditor (console session JWT; the app role under row-level security when
--database-url names it), reading the whole body, and reports

* the peak of Python allocations while producing and reading the export (tracemalloc),
* the growth of the process's peak RSS over its RSS before the export (Linux: the peak is
  reset through /proc/self/clear_refs, then read as VmHWM; the first export, without
  tracemalloc, so it also counts C allocations such as libpq's result buffers),

both after a warm-up download of an empty window (the first request loads the URL conf and
the views),

and the ratio of the largest size's figures to the smallest's (constant memory: about 1).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SESSION_LENGTH = 50
APPROVAL_EVERY = 100
INSERT_BATCH = 2000
AUDITOR = "bench-auditor"


def environment(database_url: str, owner_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="bench-" + secrets.token_urlsafe(50),
        DATABASE_URL=database_url,
        MIGRATION_DATABASE_URL=owner_url,
        ALLOWED_HOSTS="testserver",
        SECURE_SSL_REDIRECT="false",
        SECURE_HSTS_SECONDS="0",
        # Production settings require the transparency log's origin (check mirror.E201).
        TRANSPARENCY_ORIGIN="bench.example/v1/log",
    )
    return env


def fresh_database(owner_url: str) -> None:
    import psycopg

    name = owner_url.rsplit("/", 1)[1]
    admin_url = owner_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def realistic_fields(number: int) -> dict[str, Any]:
    return {
        "query": "quarterly filings for ACME Corp, 10-K and 10-Q, fiscal 2026",
        "filters": {"form_types": ["10-K", "10-Q"], "since": "2026-01-01", "limit": 25},
        "headers": {"accept": "application/json", "user-agent": "research-agent/1.4"},
        "request_id": f"req_{number:026d}",
    }


def fill(slug: str, count: int) -> None:
    """An org with ``count`` mirrored receipts, inserted in bulk (not through the push
    path, which the load test measures): what the mirror would have stored."""
    from django.db import transaction
    from django.utils import timezone

    from apps.approvals.services import approval_open, approver_key_register
    from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
    from apps.receipts.models import MirrorEntry, MirrorHead
    from apps.receipts.verifier import canonicalize, link_hash
    from apps.tenancy.models import Role
    from apps.tenancy.services import membership_add, org_create
    from tests.approvals.conftest import Approver
    from tests.receipts.factories import Agent

    org = org_create(slug=slug, name=slug, plan="custom")
    membership_add(org=org, username=AUDITOR, role=Role.AUDITOR, password=secrets.token_hex(8))
    approver_key_register(org=org, public_key=Approver("alice").public, key_id="alice")
    agent = Agent()
    prev, batch, hashes, received = EMPTY_CHAIN_HEAD, [], [], timezone.now()
    action = agent.content()["action"]
    link = ""
    for seq in range(1, count + 1):
        position = (seq - 1) % SESSION_LENGTH
        block: dict[str, Any] = {"session_id": f"session-{(seq - 1) // SESSION_LENGTH:06d}",
                                 "seq": position}  # fmt: skip
        if position:
            block["prev_receipt_hash"] = link
        receipt = agent.receipt(action={**action, "fields": realistic_fields(seq)}, **block)
        content = receipt["content"]
        text = canonicalize(receipt).decode()
        digest = receipt_digest(text)
        entry_hash = chain_hash(
            prev_chain_hash=prev, seq=seq, action_hash=content["action_hash"],
            receipt_digest_hex=digest, supersedes_action_hash="",
        )  # fmt: skip
        link = link_hash(content)
        batch.append(
            MirrorEntry(
                org=org, seq=seq, action_hash=content["action_hash"], receipt=text,
                receipt_digest=digest, kind="action", trust_level="L0",
                prev_chain_hash=prev, chain_hash=entry_hash, received_at=received,
                session_id=block["session_id"], session_seq=position, link_hash=link,
                agent_identity=content["agent_identity"], verb=action["verb"],
                tool_name=action["tool_name"],
            )
        )  # fmt: skip
        if seq % APPROVAL_EVERY == 0:
            hashes.append(content["action_hash"])
        prev = entry_hash
        if len(batch) == INSERT_BATCH or seq == count:
            with transaction.atomic():
                MirrorEntry.objects.bulk_create(batch)
            batch = []
    MirrorHead.objects.update_or_create(org=org, defaults={"size": count, "head": prev})
    for action_hash in hashes:
        approval_open(org=org, action_hash=action_hash, rule_id="payments.review")


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(slug: str) -> dict[str, Any]:
    """Download the org's export through the API; runs in its own process."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
    from django.test import Client

    from apps.tenancy.console_tokens import console_tokens_issue
    from apps.tenancy.org_context import activate_default

    user = get_user_model().objects.get(username=AUDITOR)
    token = console_tokens_issue(user=user, org_slug=slug).access
    activate_default()  # the request sets the org context from the token, as in production
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    connection.ensure_connection()

    def download(body: str = "{}") -> tuple[int, float]:
        started = time.perf_counter()
        response: HttpResponseBase = client.post(
            "/v1/evidence/export", body, content_type="application/json"
        )
        assert response.status_code == 200, response.status_code
        if isinstance(response, StreamingHttpResponse):  # the streamed export
            chunks = cast(Iterator[bytes], response.streaming_content)
            size = sum(len(chunk) for chunk in chunks)
        else:  # built in memory, as before
            assert isinstance(response, HttpResponse)
            size = len(response.content)
        response.close()
        return size, time.perf_counter() - started

    # Warm up: the URL conf, the views and the export's code load on the first request. An
    # empty window takes the same path without reading a receipt.
    download('{"from": "2000-01-01", "to": "2000-01-01"}')
    Path("/proc/self/clear_refs").write_text("5")  # the peak RSS starts again from now
    rss_before = _status_kib("VmRSS")
    size, seconds = download()
    rss_growth = _status_kib("VmHWM") - rss_before
    tracemalloc.start()
    download()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"archive_bytes": size, "seconds": seconds, "tracemalloc_peak": peak,
            "rss_growth": rss_growth * 1024}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://mirror_app@127.0.0.1:5432/mirror_evidence_bench"
    )
    parser.add_argument(
        "--owner-url",
        default=None,
        help="the table owner for migrations (default: --database-url with the postgres role)",
    )
    parser.add_argument("--sizes", default="1000,100000", help="receipts per export")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # internal: one child process
    args = parser.parse_args()

    if args.measure:
        import django

        django.setup()
        print(json.dumps(measure(args.measure)))
        return

    owner_url = args.owner_url or args.database_url.replace("//mirror_app@", "//postgres@")
    env = environment(args.database_url, owner_url)
    sizes = [int(size) for size in args.sizes.split(",")]
    fresh_database(owner_url)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT, env=env, check=True, capture_output=True,
    )  # fmt: skip
    os.environ.update(env)
    os.environ["ORG_CONTEXT_DEFAULT"] = "all"  # the fill is an operator's act
    import django

    django.setup()
    for size in sizes:
        started = time.perf_counter()
        fill(f"bench-{size}", size)
        print(f"filled bench-{size}: {size:,} receipts in {time.perf_counter() - started:.1f}s")

    print("POST /v1/evidence/export, whole body read, PostgreSQL as the app role (RLS)")
    print(f"{'receipts':>9} {'archive MB':>10} {'seconds':>8} {'tracemalloc peak MB':>20} "
          f"{'RSS growth MB':>14}")  # fmt: skip
    results = {}
    for size in sizes:
        done = subprocess.run(
            [sys.executable, __file__, "--measure", f"bench-{size}"],
            cwd=ROOT, env=env, check=True, capture_output=True, text=True,
        )  # fmt: skip
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results[size] = result
        print(
            f"{size:>9,} {result['archive_bytes'] / 2**20:>10.1f} {result['seconds']:>8.2f} "
            f"{result['tracemalloc_peak'] / 2**20:>20.2f} {result['rss_growth'] / 2**20:>14.1f}"
        )
    small, large = results[min(sizes)], results[max(sizes)]
    print(
        f"ratio {max(sizes):,} / {min(sizes):,}: tracemalloc peak "
        f"{large['tracemalloc_peak'] / small['tracemalloc_peak']:.2f}, RSS growth "
        f"{large['rss_growth'] / max(small['rss_growth'], 1):.2f} "
        f"(archive {large['archive_bytes'] / small['archive_bytes']:.0f}x larger)"
    )


if __name__ == "__main__":
    main()
