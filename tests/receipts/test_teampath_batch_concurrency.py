"""Concurrent batches on PostgreSQL: one head lock per batch keeps each batch contiguous."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from threading import Barrier
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from tests.receipts.factories import Agent, as_text

pytestmark = [
    pytest.mark.urls("config.urls.teampath"),
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("teampath_profile"),
]

BATCHES = 6
PER_BATCH = 40


def _post_batch(secret: str, texts: list[str], start: Barrier) -> tuple[int, Any]:
    client = APIClient()
    body = '{"receipts":[' + ",".join(texts) + "]}"
    try:
        start.wait()
        response = client.generic(
            "POST",
            "/v1/receipts/batch",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {secret}",
        )
        return response.status_code, response.json()
    finally:
        connection.close()


def test_racing_batches_get_gapless_seqs_each_batch_contiguous_in_array_order(cast):
    agent = Agent()
    batches = [[agent.receipt() for _ in range(PER_BATCH)] for _ in range(BATCHES)]
    shared = agent.receipt()  # in every batch: stored once, accepted everywhere
    for batch in batches:
        batch.insert(PER_BATCH // 2, shared)
    start = Barrier(BATCHES)
    with ThreadPoolExecutor(max_workers=BATCHES) as pool:
        answers = list(
            pool.map(
                lambda batch: _post_batch(cast.acme_key.secret, [as_text(r) for r in batch], start),
                batches,
            )
        )
    for (status, results), batch in zip(answers, batches, strict=True):
        assert status == HTTPStatus.OK
        assert [r["receiptId"] for r in results] == [x["content"]["action_hash"] for x in batch]
        assert all(r["accepted"] for r in results)

    seq_of = dict(MirrorEntry.objects.filter(org=cast.acme).values_list("action_hash", "seq"))
    total = BATCHES * PER_BATCH + 1
    assert sorted(seq_of.values()) == list(range(1, total + 1))
    for batch in batches:
        own = [seq_of[r["content"]["action_hash"]] for r in batch if r is not shared]
        shared_seq = seq_of[shared["content"]["action_hash"]]
        # In array order, and contiguous: nothing of another batch in between (the batch
        # that stored the shared receipt holds it at its own position).
        assert own == sorted(own)
        span = set(range(own[0], own[-1] + 1))
        assert span - set(own) <= {shared_seq}
    check = mirror_chain_check(org=cast.acme)
    assert check.ok, check.problem
    assert check.size == total


def test_racing_batches_never_overshoot_the_quota(cast):
    from apps.tenancy.services import org_set_limits

    org_set_limits(org=cast.acme, monthly_receipt_cap=50)
    agent = Agent()
    batches = [[as_text(agent.receipt()) for _ in range(20)] for _ in range(4)]
    start = Barrier(len(batches))
    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        answers = list(pool.map(lambda t: _post_batch(cast.acme_key.secret, t, start), batches))
    accepted = sum(r["accepted"] for _, results in answers for r in results)
    assert accepted == 50
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 50
    refused = [r for _, results in answers for r in results if not r["accepted"]]
    assert all(r["rejectionReason"].startswith("quota_exceeded: ") for r in refused)
