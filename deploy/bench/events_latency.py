#!/usr/bin/env python
"""Outbound events, measured on PostgreSQL with real processes:

1. Push speed with events switched off (EVENTS_ENABLED=false) against on (an endpoint
   subscribed to every event type, one `manage.py run_worker` delivering), same run,
   alternating: valid receipts (no event: the per-org subscription check only) and refused
   receipts (each records a receipt.refused event, a delivery and a task).
2. Vote to webhook: 200 approvals voted one after the other (the same `approval_vote`
   service the APIs call); for each, the time from the vote's call to the arrival of its
   `approval.vote_recorded` webhook at a receiver on 127.0.0.1 that verifies every
   signature with `standardwebhooks`. A `manage.py run_worker` process delivers.

    python deploy/bench/events_latency.py [--database-url ...] [--owner-url ...]
        [--approvals 200] [--seconds 5] [--clients 8]

Load goes only to 127.0.0.1; every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    request_bytes,
    wait_ready,
)


class Receiver:
    def __init__(self) -> None:
        self.secret = ""
        self.arrivals: dict[str, float] = {}  # approval_id -> arrival (perf_counter)
        self.count = 0
        self.bad = 0
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)

    def serve(self) -> str:
        from standardwebhooks import Webhook, WebhookVerificationError

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                at = time.perf_counter()
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    event = Webhook(receiver.secret).verify(body, headers)
                    ok = True
                except WebhookVerificationError:
                    ok, event = False, {}
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with receiver.arrived:
                    receiver.count += 1
                    receiver.bad += not ok
                    if ok and event["type"] == "approval.vote_recorded":
                        receiver.arrivals.setdefault(event["data"]["approval_id"], at)
                        receiver.arrived.notify_all()

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # bursts are not refused at the door
            daemon_threads = True

        server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/hooks"


def forget_failure_counts(env: dict[str, str]) -> None:
    """Failed-authentication counters of earlier runs (a fresh database reuses key ids)."""
    if not env.get("REDIS_URL"):
        return
    import redis

    client = redis.Redis.from_url(env["REDIS_URL"])
    for pattern in ("*rl:*", "*ratelimit*", "*credential*", "*auth*"):
        keys = list(client.scan_iter(pattern))
        if keys:
            client.delete(*keys)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


SETUP = """
from apps.events.services import webhook_endpoint_create
from apps.events.models import EventType
from apps.tenancy.services import api_key_issue, org_create
org = org_create(slug="bench-events", plan="custom")
endpoint = webhook_endpoint_create(org=org, url={url!r}, event_types=EventType.values)
print(endpoint.secret)
pushing = org_create(slug="bench-push", plan="custom")
print(api_key_issue(org=pushing, scopes=["receipts:write"]).secret)
webhook_endpoint_create(org=pushing, url={sink!r}, event_types=EventType.values)
"""

# The push runs' webhooks go to a process of their own (answers 200, reads the body), so
# the load generator's threads do not share an interpreter with a receiver.
SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def refused_requests(key: str, count: int) -> list[bytes]:
    """Receipts whose content was changed after signing: refused (HashMismatch)."""
    from tests.receipts.factories import Agent, as_text

    agent = Agent()
    out = []
    for _ in range(count):
        receipt = agent.receipt()
        receipt["content"]["action"]["fields"]["query"] = "tampered"
        body = ('{"receipt":' + as_text(receipt) + "}").encode()
        out.append(request_bytes("POST", "/v1/receipts", body, key))
    return out


# off: EVENTS_ENABLED=false; queued: on, no worker running (what the request itself pays);
# on: on, with one run_worker delivering on the same machine.
MODES = ("off", "queued", "on")


def push_speed(args: argparse.Namespace, env: dict[str, str], key: str) -> None:
    modes = "/".join(MODES)
    print(f"push speed: gunicorn workers={args.workers}, {args.clients} clients, "
          f"{args.seconds:.0f} s per run, alternating {modes}, {args.rounds} rounds")  # fmt: skip
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    per_run = int(args.seconds * args.max_rate)
    for _ in range(args.rounds):
        for mode in MODES:
            run_env = {**env, "EVENTS_ENABLED": "false" if mode == "off" else "true"}
            server = subprocess.Popen(
                [PY, "-m", "gunicorn", "config.wsgi:application", "-c", "deploy/gunicorn.conf.py"],
                cwd=ROOT, env=run_env,
            )  # fmt: skip
            worker = (
                subprocess.Popen([PY, "manage.py", "run_worker"], cwd=ROOT, env=run_env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if mode == "on"
                else None  # "queued": events recorded, nobody delivering (the request's share)
            )  # fmt: skip
            try:
                wait_ready(args.port)
                for label, requests in (
                    ("valid", push_requests([key], per_run)),
                    ("refused", refused_requests(key, per_run)),
                ):
                    run = load(args.port, requests, args.clients, args.seconds)
                    expected = 201 if label == "valid" else 409
                    unexpected = {s: n for s, n in run.statuses.items() if s != expected}
                    if unexpected:
                        print(f"  unexpected statuses ({mode}, {label}): {unexpected}")
                    results.setdefault((label, mode), []).append(
                        (run.rate, run.percentile(0.5), run.percentile(0.99))
                    )
            finally:
                for process in (server, worker):
                    if process is not None:
                        process.send_signal(signal.SIGTERM)
                        process.wait(timeout=60)
    print(
        f"{'receipts':<9} {'events':<8} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7}  (round medians)"
    )
    for label in ("valid", "refused"):
        for mode in MODES:
            rows = results[(label, mode)]
            rate = statistics.median(r[0] for r in rows)
            p50 = statistics.median(r[1] for r in rows)
            p99 = statistics.median(r[2] for r in rows)
            print(f"{label:<9} {mode:<8} {rate:>8.0f} {p50:>7.1f} {p99:>7.1f}")


def vote_latency(args: argparse.Namespace, env: dict[str, str], receiver: Receiver) -> None:
    os.environ.update(env)
    os.environ["ORG_CONTEXT_DEFAULT"] = "all"
    import base64

    import django

    django.setup()
    from apps.approvals.services import approval_open, approval_vote, approver_key_register
    from apps.tenancy.models import Org
    from tests.approvals.conftest import Approver, suspended_receipt
    from tests.receipts.factories import Agent

    org = Org.objects.get(slug="bench-events")
    approver = Approver("bench")
    approver_key_register(org=org, public_key=approver.public, key_id="bench")
    contents = []
    for _ in range(args.approvals):
        content = suspended_receipt(Agent())["content"]
        approval = approval_open(org=org, action_hash=content["action_hash"], rule_id="bench",
                                 suspended_content=content).approval  # fmt: skip
        contents.append((approval.approval_id, content))
    worker = subprocess.Popen([PY, "manage.py", "run_worker", *args.worker_args.split()],
                              cwd=ROOT, env={**env, "EVENTS_ENABLED": "true"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    latencies: list[float] = []
    missed = 0
    try:
        # The worker starts and delivers the opens' events first: the votes then meet an
        # idle queue (this measures latency, not a backlog).
        from django_tasks_db.models import DBTaskResult

        deadline = time.monotonic() + 300
        while DBTaskResult.objects.ready().exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        for approval_id, content in contents:
            token = base64.b64decode(approver.token(content, scope="bench"))
            started = time.perf_counter()
            approval_vote(org=org, action_hash=content["action_hash"], token=token)
            with receiver.arrived:
                receiver.arrived.wait_for(
                    lambda wanted=approval_id: wanted in receiver.arrivals, timeout=30
                )
                arrival = receiver.arrivals.get(approval_id)
            if arrival is None:
                missed += 1
            else:
                latencies.append((arrival - started) * 1000)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    print(f"vote -> webhook ({args.approvals} approvals, one run_worker {args.worker_args!r}):")
    median, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    print(f"  median {median:.1f} ms, p99 {p99:.1f} ms, min {min(latencies):.1f} ms, "
          f"max {max(latencies):.1f} ms; missed {missed}; "
          f"signatures failing verification: {receiver.bad} of {receiver.count}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/events_bench")
    parser.add_argument("--owner-url", default=None)
    parser.add_argument("--approvals", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--max-rate", type=int, default=1500, help="receipts prepared per second of a run"
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--port", type=int, default=8812)
    parser.add_argument("--worker-args", default="", help="extra run_worker arguments")
    parser.add_argument("--skip-push", action="store_true")
    args = parser.parse_args()

    import socket

    with socket.socket() as probe:  # a server left from an earlier run would answer instead
        if probe.connect_ex(("127.0.0.1", args.port)) == 0:
            raise SystemExit(f"port {args.port} is taken: stop what listens there first")
    owner_url = args.owner_url or args.database_url
    env = env_for(args.database_url, args.port, args.workers)
    env.update(MIGRATION_DATABASE_URL=owner_url, WEBHOOK_ALLOW_PRIVATE_DESTINATIONS="true",
               PUBLIC_BASE_URL="https://mirror.example.com", LOG_LEVEL="WARNING")  # fmt: skip
    fresh_database(owner_url)
    forget_rate_limits(env)
    forget_failure_counts(env)
    manage(env, "migrate", "--noinput")
    receiver = Receiver()
    url = receiver.serve()
    sink = subprocess.Popen([PY, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        sink_url = f"http://127.0.0.1:{sink.stdout.readline().strip()}/hooks"  # type: ignore[union-attr]
        setup = SETUP.format(url=url, sink=sink_url)
        receiver.secret, key = manage(env, "shell", "--no-imports", "-c", setup).split()
        if not args.skip_push:
            push_speed(args, env, key)
    finally:
        sink.terminate()
    vote_latency(args, env, receiver)
    print(json.dumps({"receiver_requests": receiver.count}))


if __name__ == "__main__":
    main()
