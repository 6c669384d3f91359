"""The append transaction outside Django's transactions (every request): pipelined, two
round trips, committed whole or not at all, and prepared statements kept across it."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.db import DatabaseError, connection
from rest_framework.test import APIClient

from apps.common.prepared import can_pipeline
from apps.receipts import append_sql
from apps.receipts.errors import ChainConstraint
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.receipts.selectors import mirror_chain_check
from apps.receipts.services import BatchItem, receipt_append, receipt_append_batch
from apps.receipts.verifier import parse_json, verify_receipt_value
from apps.tenancy.org_context import activate_default, activate_orgs
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent, as_text

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def verified(receipt: dict) -> BatchItem:
    verdict = verify_receipt_value(parse_json(as_text(receipt)))
    assert verdict.receipt is not None
    assert verdict.trust_level is not None
    return BatchItem(receipt=verdict.receipt, trust_level=verdict.trust_level)


@pytest.fixture
def in_acme(cast):
    activate_orgs([cast.acme.pk])
    yield cast.acme
    activate_default()


def prepared_statement_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        (count,) = cursor.fetchone()
    return int(count)


def test_outside_a_transaction_the_append_is_pipelined_and_committed(in_acme) -> None:
    assert can_pipeline()
    agent = Agent()
    first = receipt_append(org=in_acme, **vars(verified(agent.receipt())))
    second = receipt_append(org=in_acme, **vars(verified(agent.receipt())))
    assert (first.seq, second.seq) == (1, 2)
    assert not connection.in_atomic_block
    assert connection.connection.info.transaction_status == 0  # idle: committed
    assert mirror_chain_check(org=in_acme).ok


@pytest.mark.parametrize("mode", ["libpq", "psycopg"])
def test_the_setting_chooses_who_pipelines_and_prepares(in_acme, settings, mode) -> None:
    """``DB_APPEND_PIPELINE``: the append's statements are prepared by the libpq pipeline
    (``_mirror_N``) or by psycopg itself, through its public pipeline."""
    settings.DB_APPEND_PIPELINE = mode
    agent = Agent()
    assert receipt_append(org=in_acme, **vars(verified(agent.receipt()))).seq == 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement LIKE %s", ["%FOR UPDATE%"]
        )
        names = [name for (name,) in cursor.fetchall()]
    assert names
    assert all(name.startswith("_mirror_") == (mode == "libpq") for name in names), names
    assert receipt_append(org=in_acme, **vars(verified(agent.receipt()))).seq == 2
    assert mirror_chain_check(org=in_acme).ok


def test_its_statements_are_prepared_once_per_connection(in_acme) -> None:
    agent = Agent()
    receipt_append(org=in_acme, **vars(verified(agent.receipt())))
    prepared = prepared_statement_count()
    for _ in range(3):
        receipt_append(org=in_acme, **vars(verified(agent.receipt())))
    assert prepared_statement_count() == prepared > 0


def test_a_refusal_rolls_back_and_keeps_the_prepared_statements(in_acme) -> None:
    session = Agent().session("s-refused", 2)
    receipt_append(org=in_acme, **vars(verified(session[0])))
    prepared = prepared_statement_count()
    fork = Agent().session("s-refused", 1)[0]  # another receipt at seq 0 of the session
    with pytest.raises(ChainConstraint):
        receipt_append(org=in_acme, **vars(verified(fork)))
    assert connection.connection.info.transaction_status == 0
    assert prepared_statement_count() == prepared
    assert receipt_append(org=in_acme, **vars(verified(session[1]))).seq == 2


def _failing_on_the_server(real):
    def insert(self, *, entry, head, org_id):
        self._send("SELECT 1 / 0", [])  # fails on the server, inside the transaction

    return insert


def _failing_after_the_insert_was_sent(real):
    def insert(self, *, entry, head, org_id):
        real(self, entry=entry, head=head, org_id=org_id)
        raise RuntimeError("after the insert was sent")

    return insert


@pytest.mark.parametrize(
    ("failing", "raised"),
    [(_failing_on_the_server, DatabaseError), (_failing_after_the_insert_was_sent, RuntimeError)],
)
def test_a_failure_in_the_write_leaves_nothing_behind(
    in_acme, monkeypatch, failing, raised
) -> None:
    """A statement failing on the server, or an exception once the insert was sent: the
    pipeline's implicit transaction commits at its Sync, which psycopg sends even when the
    block raises, so the block's error must roll back what was already sent."""
    agent = Agent()
    receipt_append(org=in_acme, **vars(verified(agent.receipt())))
    real = append_sql.AppendStatements.insert_and_advance
    monkeypatch.setattr(append_sql.AppendStatements, "insert_and_advance", failing(real))
    with pytest.raises(raised):
        receipt_append(org=in_acme, **vars(verified(agent.receipt())))
    monkeypatch.undo()
    assert connection.connection.info.transaction_status == 0
    assert MirrorHead.objects.get(org=in_acme).size == 1
    assert MirrorEntry.objects.filter(org=in_acme).count() == 1
    assert receipt_append(org=in_acme, **vars(verified(agent.receipt()))).seq == 2
    assert mirror_chain_check(org=in_acme).ok


def test_a_batch_is_one_pipelined_transaction_in_array_order(in_acme) -> None:
    agent = Agent()
    items = [verified(agent.receipt()) for _ in range(5)]
    results = receipt_append_batch(org=in_acme, items=[*items, items[0]])
    assert [r.seq for r in results] == [1, 2, 3, 4, 5, 1]
    assert [r.appended for r in results] == [True] * 5 + [False]
    assert mirror_chain_check(org=in_acme).ok


def test_a_batch_locks_once_and_inserts_and_moves_the_head_once(in_acme, monkeypatch) -> None:
    """One lock, one related-entries read for the whole batch (pipelined behind it) and
    one multi-row insert that moves the head once, whatever the batch's size: the head row
    is updated once a batch, not once a receipt."""
    sent: list[str] = []
    real = append_sql.AppendStatements._send

    def counting(self, sql, params):
        sent.append(sql.split()[0])
        return real(self, sql, params)

    monkeypatch.setattr(append_sql.AppendStatements, "_send", counting)
    agent = Agent()
    session = agent.session("batch-size", 61)
    receipt_append_batch(org=in_acme, items=[verified(session[0])])  # the org's head row
    sent.clear()
    receipt_append_batch(org=in_acme, items=[verified(r) for r in session[1:11]])
    small = list(sent)
    sent.clear()
    results = receipt_append_batch(org=in_acme, items=[verified(r) for r in session[11:]])
    assert small == ["SELECT"] * 2 + ["WITH"]
    assert sent == ["SELECT"] * 2 + ["WITH"]
    assert [r.seq for r in results] == list(range(12, 62))
    assert MirrorHead.objects.get(org=in_acme).size == 61
    assert mirror_chain_check(org=in_acme).ok


def test_a_batch_decides_each_receipt_against_the_ones_before_it(in_acme) -> None:
    agent = Agent()
    session = agent.session("in-batch", 4)
    fork = Agent().session("in-batch", 4)[2]  # another receipt at seq 2 of the same session
    results = receipt_append_batch(
        org=in_acme, items=[verified(r) for r in [*session[:3], fork, session[1], session[3]]]
    )
    assert [type(r).__name__ for r in results] == [
        "AppendOutcome", "AppendOutcome", "AppendOutcome", "ChainConstraint",
        "AppendOutcome", "AppendOutcome",
    ]  # fmt: skip
    assert [r.seq for r in results if not isinstance(r, ChainConstraint)] == [1, 2, 3, 2, 4]
    assert mirror_chain_check(org=in_acme).ok


def test_a_supersede_over_http_marks_the_old_entry(cast, agent, approver_key) -> None:
    """The supersede path reads and updates through the ORM inside the pipeline."""
    pusher = Pusher(APIClient(), cast.acme_key.secret)
    suspended = agent.receipt()
    assert pusher(suspended).status_code == HTTPStatus.CREATED
    approved = agent.approve_l1(suspended, approver_key)
    response = pusher(approved, supersedes=suspended["content"]["action_hash"])
    assert response.status_code == HTTPStatus.CREATED, response.json()
    old = MirrorEntry.objects.get(org=cast.acme, action_hash=suspended["content"]["action_hash"])
    assert old.superseded_by == approved["content"]["action_hash"]
    assert pusher(suspended).json()["status"] == "duplicate"
