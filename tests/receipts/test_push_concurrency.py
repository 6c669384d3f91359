"""Concurrent pushes on PostgreSQL: the head-row lock keeps seq, chain and quota exact."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from apps.tenancy.services import org_set_limits
from tests.receipts.factories import Agent, as_text

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 8
PER_THREAD = 50


def _push_all(secret: str, texts: list[str]) -> list[tuple[int, dict]]:
    client = APIClient()
    results = []
    try:
        for text in texts:
            response = client.generic(
                "POST",
                "/v1/receipts",
                '{"receipt":' + text + "}",
                content_type="application/json",
                HTTP_X_API_KEY=secret,
            )
            results.append((response.status_code, response.json()))
    finally:
        connection.close()
    return results


def _run(secret: str, batches: list[list[str]]) -> list[tuple[int, dict]]:
    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        return [r for rs in pool.map(lambda b: _push_all(secret, b), batches) for r in rs]


def test_eight_threads_pushing_fifty_each_get_a_gapless_verified_chain(cast):
    agent = Agent()
    batches = [[as_text(agent.receipt()) for _ in range(PER_THREAD)] for _ in range(THREADS)]
    results = _run(cast.acme_key.secret, batches)
    assert Counter(status for status, _ in results) == {HTTPStatus.CREATED: THREADS * PER_THREAD}
    seqs = sorted(body["seq"] for _, body in results)
    assert seqs == list(range(1, THREADS * PER_THREAD + 1))
    check = mirror_chain_check(org=cast.acme)
    assert check.ok, check.problem
    assert check.size == THREADS * PER_THREAD


def test_the_same_receipt_pushed_concurrently_is_stored_once_with_one_seq(cast):
    agent = Agent()
    shared = [as_text(agent.receipt()) for _ in range(10)]
    results = _run(cast.acme_key.secret, [list(shared) for _ in range(THREADS)])
    by_hash: dict[str, set[int]] = {}
    for status, body in results:
        # 201 for the one push that appended it, 200 for each duplicate.
        assert status == (HTTPStatus.CREATED if body["status"] == "appended" else HTTPStatus.OK)
        by_hash.setdefault(body["entry_hash"], set()).add(body["seq"])
    assert all(len(seqs) == 1 for seqs in by_hash.values())
    assert Counter(body["status"] for _, body in results)["appended"] == 10
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 10
    assert mirror_chain_check(org=cast.acme).ok


def test_the_quota_is_never_overshot_under_concurrency(cast):
    org_set_limits(org=cast.acme, monthly_receipt_cap=37)
    agent = Agent()
    batches = [[as_text(agent.receipt()) for _ in range(10)] for _ in range(THREADS)]
    results = _run(cast.acme_key.secret, batches)
    statuses = Counter(status for status, _ in results)
    assert statuses == {HTTPStatus.CREATED: 37, HTTPStatus.PAYMENT_REQUIRED: THREADS * 10 - 37}
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 37
