"""The approvals' daily rollups (``ApprovalRollup``, kept by a trigger) are exact: every test
recounts from the approval rows themselves and compares, both the stored rollups (against
the stored rows) and the read the dashboard makes (against the rows as they stand now,
expiry applied the way every approval page shows it)."""

from __future__ import annotations

import base64
import contextlib
import importlib
import threading
from collections import defaultdict
from dataclasses import astuple
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from apps.approvals.content import ticket_hash
from apps.approvals.errors import ApprovalExpired, ApprovalSettled
from apps.approvals.models import Approval, ApprovalRollup, ApprovalStatus
from apps.approvals.selectors import approval_as_of, approval_days
from apps.approvals.services import approval_open, approval_vote, approvals_sweep
from apps.tenancy.services import org_create
from tests.analytics.test_rollups import rolled_back
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.model_factories import ApprovalFactory
from tests.receipts.factories import Agent

SCOPE = "payments.review"
SETTLED = ("approved", "rejected", "expired", "decided_locally")
MICROSECOND = timedelta(microseconds=1)


def recount(org: Any, now: datetime | None = None, *, stored: bool = False) -> dict[date, tuple]:
    """Per UTC day, from the approval rows: opened, approved, rejected, expired, decided
    locally, decided (approved or rejected, with a time) and their decision microseconds.
    Each row as it stands at ``now`` (as the pages show it), or as stored."""
    now = now or timezone.now()
    days: dict[date, list[int]] = defaultdict(lambda: [0] * 7)
    for row in Approval.objects.filter(org=org):
        approval = row if stored else approval_as_of(row, now)
        days[approval.created_at.date()][0] += 1
        if approval.status == ApprovalStatus.PENDING:
            continue
        day = days[(approval.resolved_at or approval.created_at).date()]
        day[1 + SETTLED.index(approval.status)] += 1
        if approval.status in ("approved", "rejected") and approval.resolved_at:
            day[5] += 1
            day[6] += max(0, (approval.resolved_at - approval.created_at) // MICROSECOND)
    return {day: tuple(counts) for day, counts in days.items() if any(counts)}


def read(org: Any, now: datetime | None = None) -> dict[date, tuple]:
    """What the dashboard reads: the rollups plus the sweep's backlog."""
    days = approval_days(org=org, now=now)
    return {day: astuple(counts) for day, counts in days.items() if any(astuple(counts))}


def folded(org: Any) -> dict[date, tuple]:
    """The rollup rows as stored."""
    rows = ApprovalRollup.objects.filter(org=org).values_list(
        "day", "opened", "approved", "rejected", "expired", "decided_locally", "decided",
        "decision_micros",
    )  # fmt: skip
    return {row[0]: tuple(row[1:]) for row in rows if any(row[1:])}


def totals(org: Any) -> list[int]:
    """The stored rollups summed over every day."""
    return [sum(column) for column in zip(*folded(org).values(), strict=True)]


def assert_exact(org: Any, now: datetime | None = None) -> None:
    assert folded(org) == recount(org, stored=True)
    assert read(org, now) == recount(org, now)


def suspended_content(*, expires_at: str = "", on_timeout: str = "") -> dict[str, Any]:
    content = suspended_receipt(Agent())["content"]
    if expires_at or on_timeout:
        content["kind"] = "suspended"
        content["suspension"] = {"approval": {"expires_at": expires_at, "on_timeout": on_timeout}}
    return content


def open_approval(org: Any, content: dict[str, Any], threshold: int = 1) -> Approval:
    return approval_open(
        org=org, action_hash=content["action_hash"], suspended_content=content, rule_id=SCOPE,
        threshold=threshold,
    ).approval  # fmt: skip


def vote(org: Any, approver: Approver, content: dict[str, Any], decision: str = "approved"):
    token = approver.token(content, scope=SCOPE, decision=decision)
    return approval_vote(org=org, action_hash=content["action_hash"], token=base64.b64decode(token))


def test_opening_voting_and_settling_move_the_rollups_exactly(cast, approvers) -> None:
    alice, bob, _ = approvers
    contents = [suspended_content() for _ in range(4)]
    for index, content in enumerate(contents):
        open_approval(cast.acme, content, threshold=2 if index == 2 else 1)
        assert_exact(cast.acme)
    assert vote(cast.acme, alice, contents[0]).status == "approved"
    assert_exact(cast.acme)
    assert vote(cast.acme, bob, contents[1], "rejected").status == "rejected"
    assert_exact(cast.acme)
    assert vote(cast.acme, alice, contents[2]).status == "pending"  # one of two
    assert_exact(cast.acme)
    assert totals(cast.acme)[:6] == [4, 1, 1, 0, 0, 2]
    assert vote(cast.acme, bob, contents[2]).status == "approved"
    assert_exact(cast.acme)


def test_decision_time_is_the_exact_sum_of_each_approvals_time_to_decision(cast, approvers) -> None:
    now = timezone.now()
    ages = [timedelta(seconds=61, microseconds=7), timedelta(hours=5, microseconds=999_999)]
    for age in ages:
        ApprovalFactory(org=cast.acme, status="approved", created_at=now - age, resolved_at=now)
    assert_exact(cast.acme)
    decided, micros = folded(cast.acme)[now.date()][5:]
    assert (decided, micros) == (2, sum(age // MICROSECOND for age in ages))


def test_a_provisional_approval_approved_then_reopened_under_other_terms_is_pending_again(
    cast, approvers
) -> None:
    content = suspended_content()
    approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content,
        provisional=True,
    )  # fmt: skip
    assert vote(cast.acme, approvers[0], content).status == "approved"
    assert_exact(cast.acme)
    reopened = open_approval(cast.acme, content, threshold=2)
    assert reopened.status == "pending"  # the approving vote was set aside
    assert_exact(cast.acme)
    assert totals(cast.acme)[1] == 0


def test_a_ticket_opened_approval_folded_into_its_contents_approval_is_counted_once(
    cast,
) -> None:
    content = suspended_content()
    approval_open(org=cast.acme, action_hash=ticket_hash(content))
    approval_open(org=cast.acme, action_hash=content["action_hash"])
    assert totals(cast.acme)[0] == 2
    open_approval(cast.acme, content)  # the ticket's approval folds into this one
    assert Approval.objects.filter(org=cast.acme).count() == 1
    assert_exact(cast.acme)
    assert totals(cast.acme)[0] == 1


@pytest.mark.parametrize(
    ("on_timeout", "shown"), [("deny", "rejected"), ("", "expired"), ("escalate", "pending")]
)
def test_an_expiry_counts_before_the_sweep_stores_it_as_after(cast, on_timeout, shown) -> None:
    """The read applies the expiry the sweep has not stored yet, as the pages do; once the
    sweep stores it, the rollups hold it and the read is the same."""
    now = timezone.now()
    expiry = now - timedelta(days=2)
    content = suspended_content(expires_at=f"{expiry:%Y-%m-%dT%H:%M:%SZ}", on_timeout=on_timeout)
    approval = open_approval(cast.acme, content)
    # Opened three days ago (as SQL could write it): one day before it expired.
    Approval.objects.filter(pk=approval.pk).update(created_at=now - timedelta(days=3))
    assert approval_as_of(Approval.objects.get(pk=approval.pk), now).status == shown
    before = read(cast.acme, now)
    assert_exact(cast.acme, now)
    assert folded(cast.acme) == recount(cast.acme, stored=True)  # still pending when stored
    assert approvals_sweep(now=now) == 1
    assert_exact(cast.acme, now)
    assert read(cast.acme, now) == before
    settled_day = before[expiry.date()] if shown != "pending" else None
    if shown == "rejected":
        assert (settled_day[2], settled_day[5]) == (1, 1)
    if shown == "expired":
        assert (settled_day[3], settled_day[5]) == (1, 0)


def test_a_late_vote_is_refused_and_its_expiry_rolls_back_with_it(cast, approvers) -> None:
    """The vote path applies the expiry under its lock, then refuses the vote: the whole
    transaction rolls back, and the counters still show the expiry, from the backlog."""
    content = suspended_content(expires_at="2020-01-01T00:00:00Z", on_timeout="deny")
    open_approval(cast.acme, content)
    stored = folded(cast.acme)
    with pytest.raises(ApprovalExpired):
        vote(cast.acme, approvers[0], content)
    assert folded(cast.acme) == stored
    assert_exact(cast.acme)


def test_a_rolled_back_vote_or_open_is_never_counted(cast, approvers) -> None:
    content = suspended_content()
    open_approval(cast.acme, content)
    stored = folded(cast.acme)
    rolled_back(lambda: vote(cast.acme, approvers[0], content))
    rolled_back(lambda: open_approval(cast.acme, suspended_content()))
    assert folded(cast.acme) == stored
    assert_exact(cast.acme)


def test_rows_written_around_the_services_are_counted_too(cast) -> None:
    """The trigger sees every write: a row inserted settled, a status changed by SQL, a
    resolution moved to another day, a delete."""
    now = timezone.now()
    settled = ApprovalFactory(
        org=cast.acme, status="rejected", created_at=now - timedelta(days=4),
        resolved_at=now - timedelta(days=1),
    )  # fmt: skip
    locally = ApprovalFactory(org=cast.acme)
    gone = ApprovalFactory(org=cast.acme, status="approved")
    assert_exact(cast.acme)
    Approval.objects.filter(pk=locally.pk).update(status="decided_locally", resolved_at=now)
    Approval.objects.filter(pk=settled.pk).update(resolved_at=now - timedelta(days=2))
    gone.delete()
    assert_exact(cast.acme)
    Approval.objects.filter(pk=settled.pk).update(status="approved", resolved_at=None)
    assert_exact(cast.acme)


def test_other_orgs_approvals_never_reach_an_orgs_rollups(cast) -> None:
    ApprovalFactory(org=cast.acme)
    ApprovalFactory(org=cast.globex, status="approved")
    ApprovalFactory(org=cast.globex)
    assert totals(cast.acme)[0] == 1
    assert totals(cast.globex)[0] == 2
    assert_exact(cast.acme)
    assert_exact(cast.globex)


def test_an_org_with_approvals_and_rollups_can_be_deleted(cast) -> None:
    """Its approvals' delete trigger only ever changes rollup rows that still exist."""
    org = org_create(slug="leaving", name="Leaving")
    ApprovalFactory(org=org)
    ApprovalFactory(org=org, status="approved")
    with transaction.atomic():
        org.delete()
    assert not ApprovalRollup.objects.filter(org_id=org.pk).exists()


def test_the_migration_fills_in_the_rollups_of_the_approvals_already_there(cast) -> None:
    """The statement migration 0009 runs once its trigger exists, on rows of every kind."""
    migration = importlib.import_module("apps.approvals.migrations.0009_approval_rollups_trigger")
    now = timezone.now()
    ApprovalFactory(org=cast.acme)
    ApprovalFactory(org=cast.acme, status="approved", created_at=now - timedelta(hours=30))
    ApprovalFactory(org=cast.acme, status="rejected", created_at=now - timedelta(days=3))
    ApprovalFactory(org=cast.acme, status="expired", created_at=now - timedelta(days=9))
    ApprovalFactory(org=cast.globex, status="decided_locally")
    expected = {org.pk: recount(org, stored=True) for org in (cast.acme, cast.globex)}
    ApprovalRollup.objects.all().delete()
    statements = migration.POSTGRESQL if connection.vendor == "postgresql" else migration.SQLITE
    with connection.cursor() as cursor:
        cursor.execute(statements[-1])  # the fill
    assert {org.pk: folded(org) for org in (cast.acme, cast.globex)} == expected


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_opens_votes_and_sweeps_stay_exact(cast) -> None:
    """Voters on a quorum and on single approvals, openers and a sweeper at once: each
    transition moves the rollups in its own transaction, under the rollup rows' locks, and
    every read afterwards equals the recount."""
    from apps.approvals.services import approver_key_register

    team = [Approver(f"a{index}") for index in range(5)]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    quorum = suspended_content()
    open_approval(cast.acme, quorum, threshold=3)
    singles = [suspended_content() for _ in range(5)]
    for content in singles:
        open_approval(cast.acme, content)
    overdue = [suspended_content(expires_at="2020-01-01T00:00:00Z", on_timeout="deny")]
    overdue += [suspended_content(expires_at="2020-01-01T00:00:00Z") for _ in range(3)]
    for content in overdue:
        open_approval(cast.acme, content)
    errors: list[BaseException] = []

    def run(work) -> None:
        try:
            work()
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    def voter(index: int) -> None:
        with contextlib.suppress(ApprovalSettled):  # past the threshold: refused, fine
            vote(cast.acme, team[index], quorum)
        decision = "rejected" if index % 2 else "approved"
        vote(cast.acme, team[index], singles[index], decision)

    def opener() -> None:
        for _ in range(5):
            open_approval(cast.acme, suspended_content())

    threads = [threading.Thread(target=run, args=(lambda i=i: voter(i),)) for i in range(5)]
    threads += [threading.Thread(target=run, args=(opener,)) for _ in range(2)]
    threads += [threading.Thread(target=run, args=(approvals_sweep,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert Approval.objects.get(action_hash=quorum["action_hash"]).status == "approved"
    assert_exact(cast.acme)
    approvals_sweep()
    assert_exact(cast.acme)
    # 1 quorum + 5 singles + 4 overdue + 10 opened; approved: quorum and 3 singles;
    # rejected: 2 singles and the deny expiry; expired: 3.
    assert totals(cast.acme)[:5] == [20, 4, 3, 3, 0]
