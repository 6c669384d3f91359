"""A policy replay costs its window, never the org: in an org of 200,000 entries
(``scale_org``, tests/scale.py) the preview request sizes the window from the rollups and
queues it without reading the mirror's rows, and the worker reads the window through the
``(org, received_at)`` index one keyset page at a time, each page's generic plan reading no
more entries than the page holds (left to itself, the planner read the whole rest of the
window for every page: a sort of the window, a bitmap scan of it, or a parallel sequential
scan of the table, depending on the page)."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from apps.analytics.services import rollups_fold_org
from apps.policy.models import PolicyReplay
from apps.policy.replay import REPLAY_BATCH
from apps.policy.selectors import policy_replay_report
from apps.policy.services import policy_replay_run
from apps.receipts.models import MirrorEntry
from apps.tenancy.org_context import activate_all_orgs
from tests.policy.test_policy_api import BLOCK_SEARCH
from tests.scale import RECEIVED_EVERY_SECONDS, ScaleOrg, assert_bounded, mirror_plans
from tests.test_detail_read_plans import dashboard

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

WINDOW_INDEX = MirrorEntry._meta.indexes[1].name
assert WINDOW_INDEX == "mirror_entry_received"


def test_a_long_window_is_queued_without_reading_the_orgs_entries(scale_org: ScaleOrg) -> None:
    activate_all_orgs()
    rollups_fold_org(org_id=scale_org.org.pk, batch=scale_org.entries)  # the worker's fold
    client = dashboard(scale_org, "manager")

    with mirror_plans() as statements:
        answer = client.post("/v1/policy/preview", {"toml": BLOCK_SEARCH, "days": 7}, format="json")

    assert answer.status_code == HTTPStatus.ACCEPTED, answer.content
    # About 1,440 receipts a day, by the rollups' whole days.
    assert answer.json()["estimated_receipts"] > 7 * 86_400 // RECEIVED_EVERY_SECONDS
    # The rollups are folded up to the head: no entry is read, nor counted.
    assert statements == []


def test_the_worker_reads_the_window_one_bounded_page_at_a_time(scale_org: ScaleOrg) -> None:
    activate_all_orgs()
    rollups_fold_org(org_id=scale_org.org.pk, batch=scale_org.entries)
    answer = dashboard(scale_org, "manager").post(
        "/v1/policy/preview", {"toml": BLOCK_SEARCH, "days": 2}, format="json"
    )
    assert answer.status_code == HTTPStatus.ACCEPTED
    activate_all_orgs()
    replay = PolicyReplay.objects.get(replay_id=answer.json()["replay_id"])

    with mirror_plans() as statements:
        policy_replay_run(replay_pk=replay.pk)

    in_window = MirrorEntry.objects.filter(
        org=scale_org.org, received_at__gte=replay.window_start, received_at__lte=replay.window_end
    ).count()
    assert in_window > 3 * REPLAY_BATCH  # several pages
    # One statement a page (no two entries share an instant here).
    assert len(statements) == in_window // REPLAY_BATCH + 1
    assert_bounded(statements, rows=REPLAY_BATCH + 1)
    for statement in statements:
        for kind in ("generic", "custom"):
            (scan,) = statement.scans(MirrorEntry._meta.db_table, kind)
            assert scan.get("Index Name") == WINDOW_INDEX, statement.shown(kind)
    # The bulk rows are not signed receipts: every one is read, and left out as unverified.
    replay.refresh_from_db()
    report = policy_replay_report(replay)
    assert report is not None
    assert (report.considered, report.not_verified) == (0, in_window)
