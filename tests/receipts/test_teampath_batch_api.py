"""POST /v1/receipts/batch: one OutboxPushResult per receipt, in order, one lock."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from tests.receipts.factories import as_text
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH


def action_hash(receipt):
    return receipt["content"]["action_hash"]


def seqs_of(org, receipts):
    seq_by_hash = dict(MirrorEntry.objects.filter(org=org).values_list("action_hash", "seq"))
    return [seq_by_hash.get(action_hash(receipt)) for receipt in receipts]


def test_a_batch_of_valid_receipts_is_200_with_results_in_order(acme, agent, cast):
    receipts = [agent.receipt() for _ in range(5)]
    response = acme.batch(receipts)
    assert response.status_code == HTTPStatus.OK
    assert response.json() == [
        {"receiptId": action_hash(r), "accepted": True, "trustLevel": "L0"} for r in receipts
    ]
    assert seqs_of(cast.acme, receipts) == [1, 2, 3, 4, 5]
    assert mirror_chain_check(org=cast.acme).ok


def test_a_batch_mixing_accepted_and_rejected_keeps_order_and_seq_order(acme, agent, cast):
    good = [agent.receipt() for _ in range(4)]
    tampered = agent.receipt()
    tampered["content"]["action"]["fields"]["query"] = "tampered"
    forged = agent.receipt()
    forged["signatures"][0]["signature"] = agent.receipt()["signatures"][0]["signature"]
    malformed = agent.receipt()
    malformed["extra"] = True
    items = [good[0], tampered, good[1], malformed, "[1, 2]", good[2], forged, good[3]]
    response = acme.batch(items)
    assert response.status_code == HTTPStatus.OK
    results = response.json()
    assert len(results) == len(items)
    assert [result["accepted"] for result in results] == [
        True, False, True, False, False, True, False, True,
    ]  # fmt: skip
    assert results[1] == {
        "receiptId": action_hash(tampered),
        "accepted": False,
        "rejectionReason": "HashMismatch",
    }
    assert results[3]["receiptId"] == action_hash(malformed)
    assert results[3]["rejectionReason"].startswith("Malformed: ")
    assert results[4] == {
        "receiptId": "",
        "accepted": False,
        "rejectionReason": "Malformed: the receipt must be a JSON object",
    }
    assert results[6]["rejectionReason"] == "InvalidSignature: signature verification failed"
    for index, receipt in zip((0, 2, 5, 7), good, strict=True):
        assert results[index] == {
            "receiptId": action_hash(receipt),
            "accepted": True,
            "trustLevel": "L0",
        }
        assert "rejectionReason" not in results[index]
    assert seqs_of(cast.acme, good) == [1, 2, 3, 4]
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 4
    assert mirror_chain_check(org=cast.acme).ok


def test_the_same_receipt_twice_in_a_batch_is_stored_once(acme, agent, cast):
    receipt = agent.receipt()
    other = agent.receipt()
    response = acme.batch([receipt, other, receipt])
    assert response.json() == [
        {"receiptId": action_hash(receipt), "accepted": True, "trustLevel": "L0"},
        {"receiptId": action_hash(other), "accepted": True, "trustLevel": "L0"},
        {"receiptId": action_hash(receipt), "accepted": True, "trustLevel": "L0"},
    ]
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 2
    assert seqs_of(cast.acme, [receipt, other]) == [1, 2]


def test_receipts_already_mirrored_are_accepted_duplicates(acme, agent, cast):
    earlier = agent.receipt()
    acme.push(earlier)
    fresh = agent.receipt()
    results = acme.batch([fresh, earlier]).json()
    assert [result["accepted"] for result in results] == [True, True]
    assert seqs_of(cast.acme, [earlier, fresh]) == [1, 2]


def test_a_session_in_one_batch_links_to_entries_appended_earlier_in_it(acme, agent, cast):
    chain = agent.session("s-1", 3)
    fork = agent.session("s-1", 2)[1]  # a different receipt at seq 1
    results = acme.batch([*chain, fork]).json()
    assert [result["accepted"] for result in results] == [True, True, True, False]
    assert results[3]["rejectionReason"].startswith("chain_constraint: ")
    assert "fork" in results[3]["rejectionReason"]
    assert seqs_of(cast.acme, chain) == [1, 2, 3]


@pytest.mark.parametrize("session_id", ['s "quoted", {braced}', "back\\slash\\", "NULL", " é ⚙ "])
def test_a_later_batch_finds_a_sessions_entries_whatever_its_id(acme, agent, cast, session_id):
    """The batch's related read passes the session ids as one array literal: an id with
    quotes, braces, commas, backslashes or spaces still finds its mirrored neighbours."""
    chain = agent.session(session_id, 3)
    assert [r["accepted"] for r in acme.batch(chain[:2]).json()] == [True, True]
    fork = agent.session(session_id, 2)[1]  # a different receipt at seq 1
    results = acme.batch([fork, chain[2], chain[0]]).json()
    assert [result["accepted"] for result in results] == [False, True, True]
    assert "fork" in results[0]["rejectionReason"]
    assert seqs_of(cast.acme, chain) == [1, 2, 3]
    assert MirrorEntry.objects.get(org=cast.acme, session_seq=2).session_id == session_id
    assert mirror_chain_check(org=cast.acme).ok


def test_a_batch_stores_each_receipt_as_its_canonical_text(acme, agent, cast):
    """The receipt texts travel to PostgreSQL apart from the other columns: quotes,
    backslashes, escapes and non-ASCII arrive byte for byte as the JCS text."""
    awkward = ['say "hi"', "C:\\path\\", "tab\t line\n", "é ⚙ 𝄞", '{"json": [1]}']
    receipts = [
        agent.receipt(action={**agent.content()["action"], "fields": {"q": text}})
        for text in awkward
    ]
    assert all(result["accepted"] for result in acme.batch(receipts).json())
    stored = dict(MirrorEntry.objects.filter(org=cast.acme).values_list("action_hash", "receipt"))
    for receipt in receipts:
        canonical = json.dumps(receipt, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert stored[action_hash(receipt)] == canonical
    assert mirror_chain_check(org=cast.acme).ok


def test_a_batch_as_large_as_the_setting_is_accepted(acme, agent, settings):
    settings.TEAMPATH_BATCH_MAX = 7
    response = acme.batch([agent.receipt() for _ in range(7)])
    assert response.status_code == HTTPStatus.OK
    assert len(response.json()) == 7


def test_a_batch_larger_than_the_setting_is_400_and_stores_nothing(acme, agent, settings):
    settings.TEAMPATH_BATCH_MAX = 3
    response = acme.batch([agent.receipt() for _ in range(4)])
    body = assert_error(response, HTTPStatus.BAD_REQUEST, "batch_too_large")
    assert "at most 3" in body["message"]
    assert not MirrorEntry.objects.exists()


def test_the_default_batch_limit_is_100():
    from config.settings import base

    assert base.TEAMPATH_BATCH_MAX == 100


@pytest.mark.parametrize(
    "body",
    [
        "[]",
        '"receipts"',
        "{}",
        '{"receipts": []}',
        '{"receipts": null}',
        '{"receipts": {}}',
        '{"receipts": "x"}',
        '{"receipts": [], "receipts": []}',
        '{"receipts": [{}], "more": 1}',
    ],
)
def test_a_body_of_the_wrong_shape_is_400_validation_failed(acme, body):
    response = acme.post("/v1/receipts/batch", body)
    assert_error(response, HTTPStatus.BAD_REQUEST, "validation_failed")
    assert not MirrorEntry.objects.exists()


@pytest.mark.parametrize("body", ["not json", '{"receipts": [', '{"receipts": [NaN]}'])
def test_a_body_that_is_not_json_is_400_invalid_json(acme, body):
    assert_error(acme.post("/v1/receipts/batch", body), HTTPStatus.BAD_REQUEST, "invalid_json")


def test_a_non_json_content_type_is_400_invalid_json(acme, agent):
    body = json.dumps({"receipts": [agent.receipt()]})
    response = acme.post("/v1/receipts/batch", body, content_type="text/plain")
    assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_json")


def test_an_oversize_batch_is_413(acme, agent, settings):
    settings.JSON_BODY_MAX_BYTES = 4096
    response = acme.batch([agent.receipt() for _ in range(10)])
    assert_error(response, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large")


def test_receipts_in_a_batch_reach_the_verifier_exactly_as_sent(acme, agent):
    receipt = agent.receipt()
    text = as_text(receipt).replace('"trust_level":"L0"', '"trust_level":"L0","trust_level":"L0"')
    results = acme.batch([text]).json()
    assert results[0]["accepted"] is False
    assert results[0]["rejectionReason"].startswith("Malformed: ")


def test_a_batchs_refused_receipts_are_counted_in_one_statement(acme, agent, cast):
    """Each verdict refusal counts for its kind and day (the analytics read them), and a
    batch of bad receipts costs one upsert, not one round trip a receipt."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.receipts.models import RefusalCount

    tampered = []
    for _ in range(3):
        receipt = agent.receipt()
        receipt["content"]["action"]["fields"]["query"] = "tampered"
        tampered.append(receipt)
    malformed = []
    for _ in range(2):
        receipt = agent.receipt()
        receipt["extra"] = True
        malformed.append(receipt)
    items = [*tampered, agent.receipt(), *malformed, "[1]"]  # "[1]": not a receipt object
    with CaptureQueriesContext(connection) as queries:
        response = acme.batch(items)
    assert response.status_code == HTTPStatus.OK
    assert [result["accepted"] for result in response.json()] == [
        False, False, False, True, False, False, False,
    ]  # fmt: skip
    counts = dict(RefusalCount.objects.filter(org=cast.acme).values_list("kind", "count"))
    assert counts == {"HashMismatch": 3, "Malformed": 2}
    upserts = [q for q in queries.captured_queries if "receipts_refusalcount" in q["sql"]]
    assert len(upserts) == 1
    acme.batch(tampered[:1])  # the next batch adds to the day's count
    assert RefusalCount.objects.get(org=cast.acme, kind="HashMismatch").count == 4
