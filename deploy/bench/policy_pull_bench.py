#!/usr/bin/env python
"""What recording the fleet costs the policy pull (issue 32): `GET /v1/policy/pull` through
the whole Django stack (middleware, API key authentication, the org's row-level security,
DRF), in one process against PostgreSQL, three ways in the same run, alternating:

* before: the pull without its record (``policy_pull_record`` replaced by a no-op);
* steady: the pull as shipped, one agent pulling again and again: its key's row is written
  at most once a minute, so nearly every pull sends no statement at all;
* writing: the worst case, a pull whose record is written every time (the user agent
  alternates, so the row changes at each pull): one upsert each.

    python deploy/bench/policy_pull_bench.py [--database-url URL] [--owner-url URL]
        [--pulls 50] [--rounds 40]

The ways take turns in short blocks (--pulls each, --rounds times), so a machine whose load
drifts during the run weighs on all three alike. The database named by --owner-url is
dropped and created again, then migrated. Prints the median and 95th percentile
microseconds per pull of each way and their ratios to before.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from deploy.bench.push_load import env_for, fresh_database, manage  # noqa: E402


def timed(pull: Callable[[int], int], count: int) -> list[float]:
    """Microseconds of each of ``count`` pulls (each must answer 200)."""
    spent = []
    for index in range(count):
        start = time.perf_counter()
        status = pull(index)
        spent.append((time.perf_counter() - start) * 1e6)
        assert status == 200, status
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", default="postgres://mirror_app@127.0.0.1:5432/mirror_bench"
    )
    parser.add_argument("--owner-url", default="postgres://postgres@127.0.0.1:5432/mirror_bench")
    parser.add_argument("--pulls", type=int, default=50, help="per way and round")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()

    env = env_for(args.database_url, port=0, workers=1)
    env["MIGRATION_DATABASE_URL"] = args.owner_url
    fresh_database(args.owner_url)
    manage(env, "migrate", "--noinput")
    os.environ.update(env)

    import django

    django.setup()
    from django.test import Client

    from apps.api.keyscoped import policy as pull_view
    from apps.policy import fleet
    from apps.policy.services import policy_deploy
    from apps.tenancy.org_context import activate_all_orgs, activate_default
    from apps.tenancy.services import api_key_issue, org_create

    activate_all_orgs()  # the setup acts as an operator's command would
    org = org_create(slug="bench-pull", plan="custom")
    secret = api_key_issue(org=org, scopes=["policy:read"]).secret
    toml = (ROOT / "deploy" / "examples" / "policy.toml").read_text()
    policy_deploy(org=org, toml=toml)
    activate_default()

    client = Client(SERVER_NAME="127.0.0.1")
    recorded = fleet.policy_pull_record

    def pull(user_agent: Callable[[int], str]) -> Callable[[int], int]:
        def one(index: int) -> int:
            response = client.get(
                "/v1/policy/pull", HTTP_X_API_KEY=secret, HTTP_USER_AGENT=user_agent(index)
            )
            return int(response.status_code)

        return one

    def unrecorded(**_: object) -> bool:
        return False

    ways: dict[str, tuple[Callable[..., bool], Callable[[int], int]]] = {
        "before": (unrecorded, pull(lambda _: "heso/0.5.1")),
        "steady": (recorded, pull(lambda _: "heso/0.5.1")),
        "writing": (recorded, pull(lambda index: f"heso/0.5.1 ({index % 2})")),
    }
    spent: dict[str, list[float]] = {name: [] for name in ways}
    timed(pull(lambda _: "warm-up"), 200)  # connections, caches, the key cache
    for _ in range(args.rounds):
        for name, (record, way) in ways.items():
            pull_view.policy_pull_record = record  # type: ignore[assignment]
            spent[name] += timed(way, args.pulls)
    pull_view.policy_pull_record = recorded

    before = statistics.median(spent["before"])
    print(f"{args.rounds} rounds x {args.pulls} pulls per way, one process, PostgreSQL")
    for name, values in spent.items():
        median = statistics.median(values)
        p95 = sorted(values)[int(0.95 * len(values))]
        print(f"{name:8} median {median:7.0f} us  p95 {p95:7.0f} us  ratio {median / before:.3f}")


if __name__ == "__main__":
    main()
