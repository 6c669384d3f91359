"""Finished policy replays past POLICY_REPLAY_RETENTION_DAYS are deleted in bounded batches
found through an index; one pending or running is never deleted, one a proposal names is
kept with the proposal, and a deleted replay polled answers not found. A replay whose
task the worker reclaim gave up on is failed, so it ages out like the others."""

from __future__ import annotations

import re
from datetime import timedelta
from http import HTTPStatus
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.common.scheduling import schedule
from apps.common.workers import tasks_reclaim
from apps.policy.models import PolicyProposal, PolicyReplay, ProposalStatus, ReplayStatus
from apps.policy.services import policy_deploy, policy_replay_request, policy_replays_prune
from apps.tenancy.org_context import activate_all_orgs
from apps.tenancy.services import org_set_policy_quorum
from deploy.bench.bulk_rows import insert_select
from tests.console.test_console_admin import member as console_member
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, rule_toml
from tests.receipts.factories import Agent
from tests.receipts.test_lookup_columns_migration import _migrate
from tests.scale import assert_bounded, mirror_plans, owner_connection

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

REPLAY_TABLE = PolicyReplay._meta.db_table
RETENTION_INDEX = "policy_replay_finished"


@pytest.fixture
def retention(settings):
    settings.POLICY_REPLAY_RETENTION_DAYS = 30
    settings.RETENTION_PRUNE_BATCH = 500
    settings.RETENTION_PRUNE_BATCHES_PER_RUN = 20
    return settings


def replay(org, *, days_ago: int, status: str = ReplayStatus.READY) -> PolicyReplay:
    """A replay asked for ``days_ago`` (replayed in the request: no receipts), finished
    then, or left pending or running since then."""
    made = policy_replay_request(org=org, toml=BLOCK_SEARCH, days=1)
    assert made.status == ReplayStatus.READY
    then = timezone.now() - timedelta(days=days_ago)
    finished = status in (ReplayStatus.READY, ReplayStatus.FAILED)
    PolicyReplay.objects.filter(pk=made.pk).update(
        status=status,
        created_at=then,
        finished_at=then if finished else None,
        report=made.report if status == ReplayStatus.READY else None,
    )
    made.refresh_from_db()
    return made


def kept(*replays: PolicyReplay) -> list[str]:
    return sorted(
        PolicyReplay.objects.filter(pk__in=[r.pk for r in replays]).values_list(
            "replay_id", flat=True
        )
    )


def test_old_finished_replays_go_and_recent_and_unfinished_ones_stay(cast, retention) -> None:
    old = replay(cast.acme, days_ago=31)
    old_failed = replay(cast.acme, days_ago=400, status=ReplayStatus.FAILED)
    theirs = replay(cast.globex, days_ago=31)
    recent = replay(cast.acme, days_ago=29)
    # Asked for long ago and still waiting for, or run by, a worker: never deleted.
    pending = replay(cast.acme, days_ago=90, status=ReplayStatus.PENDING)
    running = replay(cast.acme, days_ago=90, status=ReplayStatus.RUNNING)

    assert policy_replays_prune() == 3

    assert kept(old, old_failed, theirs, recent, pending, running) == sorted(
        [recent.replay_id, pending.replay_id, running.replay_id]
    )
    assert policy_replays_prune() == 0
    # Counted back from ``now``: two days on, the recent one is past its 30 days too.
    assert policy_replays_prune(now=timezone.now() + timedelta(days=2)) == 1
    assert kept(recent, pending, running) == sorted([pending.replay_id, running.replay_id])


def test_zero_days_keeps_every_replay(cast, retention) -> None:
    retention.POLICY_REPLAY_RETENTION_DAYS = 0
    ancient = replay(cast.acme, days_ago=3650)
    assert policy_replays_prune() == 0
    assert kept(ancient) == [ancient.replay_id]


def test_a_run_deletes_in_bounded_batches_oldest_first_and_the_next_run_goes_on(
    cast, retention
) -> None:
    retention.RETENTION_PRUNE_BATCH = 2
    retention.RETENTION_PRUNE_BATCHES_PER_RUN = 2
    replays = [replay(cast.acme, days_ago=31 + n) for n in range(5)]

    with CaptureQueriesContext(connection) as run:
        assert policy_replays_prune() == 4

    deletes = [q["sql"] for q in run.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) == 2  # two batches of two, each one statement
    assert kept(*replays) == [replays[0].replay_id]  # the newest of the five
    assert policy_replays_prune() == 1
    assert kept(*replays) == []


def test_the_replays_proposals_name_are_kept_open_or_decided(cast, retention, dashboard) -> None:
    org_set_policy_quorum(org=cast.acme, quorum=2)
    superseded = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).proposal
    # An owner's break-glass of another text supersedes it; a later change is proposed.
    policy_deploy(
        org=cast.acme, toml=rule_toml("search.ask", "tool_call", "require_approval"),
        break_glass_reason="Incident 7: searches must wait for a human",
    )  # fmt: skip
    open_now = policy_deploy(org=cast.acme, toml=BLOCK_SEARCH).proposal
    assert superseded is not None
    assert open_now is not None
    superseded.refresh_from_db()
    assert (superseded.status, open_now.status) == (ProposalStatus.SUPERSEDED, ProposalStatus.OPEN)
    named = [p.replay["replay_id"] for p in (superseded, open_now)]
    # A year on, their replays are far past retention; a preview of the same age is not kept.
    year_ago = timezone.now() - timedelta(days=365)
    PolicyReplay.objects.update(created_at=year_ago, finished_at=year_ago)
    preview = replay(cast.acme, days_ago=365)

    assert policy_replays_prune() == 1

    assert sorted(PolicyReplay.objects.values_list("replay_id", flat=True)) == sorted(named)
    assert kept(preview) == []
    # What each proposal links to, through the API and on its console page, is there.
    client, console = dashboard("manager"), console_member("manager")
    for proposal in PolicyProposal.objects.filter(replay__isnull=False):
        answer = client.get(f"/v1/policy/replays/{proposal.replay['replay_id']}")
        assert answer.status_code == HTTPStatus.OK
        assert (answer.json()["status"], answer.json()["considered"]) == ("ready", 0)
        page = console.get(f"/admin/policy/policyproposal/{proposal.pk}/change/").content.decode()
        (link,) = re.findall(r'href="(/admin/policy/policyversion/preview/rpl_[^"]+/)"', page)
        assert console.get(link).status_code == HTTPStatus.OK


def test_a_deleted_replay_polled_answers_not_found(cast, retention, dashboard) -> None:
    client, console = dashboard("manager"), console_member("manager")
    asked = client.post("/v1/policy/preview", {"toml": BLOCK_SEARCH}, format="json")
    assert asked.status_code == HTTPStatus.OK
    replay_id = asked.json()["replay_id"]
    page = f"/admin/policy/policyversion/preview/{replay_id}/"
    assert console.get(page).status_code == HTTPStatus.OK
    PolicyReplay.objects.update(finished_at=timezone.now() - timedelta(days=31))

    assert policy_replays_prune() == 1

    # The key-scoped profile's not-found answer, as for an id that never was.
    gone = client.get(asked.json()["url"])
    assert gone.status_code == HTTPStatus.NOT_FOUND
    assert gone.json() == {"detail": f"no policy replay {replay_id!r} in this org"}
    assert console.get(page).status_code == HTTPStatus.NOT_FOUND


def test_a_replay_whose_task_will_not_run_again_is_failed_and_ages_out(
    cast, retention, dashboard, push
) -> None:
    retention.POLICY_REPLAY_INLINE_RECEIPTS = 0  # a window of one receipt runs in the worker
    assert push(Agent().receipt()).status_code == HTTPStatus.CREATED
    queued = policy_replay_request(org=cast.acme, toml=BLOCK_SEARCH, days=1)
    again = policy_replay_request(org=cast.acme, toml=BLOCK_SEARCH, days=1)
    assert queued.status == again.status == ReplayStatus.PENDING
    PolicyReplay.objects.update(status=ReplayStatus.RUNNING)
    # Both tasks' workers died; the first one's died every time it was tried.
    for task, workers in (
        (_task_of(queued), ["w1", "w2", "w3"]), (_task_of(again), ["w1"]),
    ):  # fmt: skip
        task.status, task.worker_ids = "RUNNING", workers
        task.started_at = timezone.now() - timedelta(hours=1)
        task.save(update_fields=["status", "worker_ids", "started_at"])

    reclaimed = tasks_reclaim()

    assert (reclaimed.failed, reclaimed.requeued) == ([str(_task_of(queued).id)],
                                                      [str(_task_of(again).id)])  # fmt: skip
    queued.refresh_from_db()
    again.refresh_from_db()
    assert queued.status == ReplayStatus.FAILED
    assert queued.finished_at == reclaimed.now
    # The one queued again is run again from the start by its task: left as it was.
    assert (again.status, again.finished_at) == (ReplayStatus.RUNNING, None)
    polled = dashboard("manager").get(f"/v1/policy/replays/{queued.replay_id}").json()
    assert polled["status"] == "failed"
    assert "worker replaying it stopped" in polled["error"]

    assert policy_replays_prune() == 0
    assert policy_replays_prune(now=timezone.now() + timedelta(days=31)) == 1
    assert kept(queued, again) == [again.replay_id]


def _task_of(replayed: PolicyReplay) -> DBTaskResult:
    return DBTaskResult.objects.get(
        task_path="apps.policy.tasks.run_policy_replay", args_kwargs__args=[replayed.pk]
    )


@pytest.mark.django_db(transaction=True)  # the rows are committed and analyzed
def test_each_batch_is_read_through_the_partial_index_never_a_scan(cast, retention) -> None:
    retention.RETENTION_PRUNE_BATCHES_PER_RUN = 3
    # 20,000 replays asked for long ago, n = 1 the oldest: every 500th still running, one in
    # a thousand a proposal's (neither is in the index), the others finished 60 days ago.
    expired = 20_000
    with owner_connection() as owner, owner.cursor() as cursor:
        insert_select(
            cursor, PolicyReplay,
            {
                "org_id": str(cast.acme.pk),
                "replay_id": "'rpl_bulk_' || n",
                "status": "CASE WHEN mod(n, 10) = 0 THEN 'failed' ELSE 'ready' END",
                "proposed_policy_hash": "md5(n::text) || md5(n::text)",
                "current_policy_hash": "md5(n::text) || md5(n::text)",
                "days": "7",
                "window_start": "now() - interval '90 days'",
                "window_end": "now() - interval '83 days'",
                "report": "'{}'::jsonb",
                "for_proposal": "mod(n, 1000) = 7",
                "finished_at": (
                    "CASE WHEN mod(n, 500) = 0 THEN NULL "
                    "ELSE now() - interval '60 days' + n * interval '1 second' END"
                ),
            },
            f"generate_series(1, {expired}) AS n",
        )  # fmt: skip
        cursor.execute(
            f"UPDATE {REPLAY_TABLE} SET status = 'running' WHERE finished_at IS NULL"  # noqa: S608
        )
        cursor.execute(f"VACUUM ANALYZE {REPLAY_TABLE}")

    deletes: list[dict[str, Any]] = []

    def explain_deletes(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.startswith("DELETE"):
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
                deletes.append(cursor.fetchone()[0][0]["Plan"])
        return execute(sql, params, many, context)

    with mirror_plans(REPLAY_TABLE) as statements, connection.execute_wrapper(explain_deletes):
        assert policy_replays_prune() == 3 * 500

    # Each batch: its 500 rows read in order through the index, and no more.
    assert len(statements) == 3
    assert_bounded(statements, REPLAY_TABLE, rows=500)
    for statement in statements:
        for kind in ("generic", "custom"):
            (scan,) = statement.scans(REPLAY_TABLE, kind)
            assert scan["Node Type"] == "Index Scan", statement.shown(kind)
            assert scan["Index Name"] == RETENTION_INDEX, statement.shown(kind)
    # Then deleted by primary key.
    assert len(deletes) == 3
    for plan in deletes:
        (scan,) = plan["Plans"]
        assert scan["Index Name"] == "policy_policyreplay_pkey", plan
    # The oldest 1,500 finished ones went (n = 1 .. 1,505), passing over the running ones
    # and the proposals'.
    left = PolicyReplay.objects.filter(replay_id__startswith="rpl_bulk_")
    assert left.count() == expired - 3 * 500
    numbers = sorted(
        int(rid.removeprefix("rpl_bulk_")) for rid in left.values_list("replay_id", flat=True)
    )
    assert numbers[:6] == [7, 500, 1000, 1007, 1500, 1506]


def test_the_prune_is_a_periodic_task_of_the_policy_app(settings) -> None:
    names = {periodic.name: periodic for periodic in schedule()}
    periodic = names["prune_policy_replays"]
    assert periodic.work.module_path == "apps.policy.tasks.prune_policy_replays"
    settings.RETENTION_PRUNE_SECONDS = 600
    assert periodic.every() == 600
    settings.RETENTION_PRUNE_SECONDS = 0
    assert periodic.every() == 0


@pytest.mark.django_db(transaction=True)  # migrated back and forth
def test_the_migration_marks_the_replays_proposals_named_before_it(cast) -> None:
    org_set_policy_quorum(org=cast.acme, quorum=2)
    proposal = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).proposal
    assert proposal is not None
    preview = replay(cast.acme, days_ago=1)

    _migrate(("policy", "0008_policyreplay_row_level_security"))  # no mark, no index
    _migrate(("policy", "0009_policyreplay_retention"))

    activate_all_orgs()
    marked = PolicyReplay.objects.filter(for_proposal=True).values_list("replay_id", flat=True)
    assert list(marked) == [proposal.replay["replay_id"]]
    assert PolicyReplay.objects.filter(replay_id=preview.replay_id, for_proposal=False).exists()
