"""The team-path push results are built as plain dicts (a batch answers a hundred of them);
the serializer stays their description, so the two must write the same members, in the
same order, for every kind of result."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.api.teampath.receipts import (
    OutboxPushResultSerializer,
    accepted_result,
    refused_result,
    rejection_reason,
)
from apps.approvals.services import claimed_action_hash
from apps.common.errors import DomainError, InvalidInput
from apps.receipts.errors import ChainConstraint, QuotaExceeded, ReceiptMalformed, ReceiptRejected
from apps.receipts.services import AppendOutcome
from apps.receipts.verifier import JsonValue, parse_json

HASH = "ab" * 32


def _serialized(instance: dict[str, Any]) -> str:
    return json.dumps(OutboxPushResultSerializer(instance).data)


@pytest.mark.parametrize(
    "outcome",
    [
        AppendOutcome(seq=1, action_hash=HASH, appended=True),
        AppendOutcome(seq=2, action_hash=HASH, appended=False, trust_level="L1"),
        AppendOutcome(seq=3, action_hash=HASH, appended=True, claimed_trust_level="L1"),
    ],
)
def test_an_accepted_result_is_what_the_serializer_writes(outcome):
    expected = _serialized(
        {
            "receipt_id": outcome.action_hash,
            "accepted": True,
            "trust_level": outcome.trust_level,
            "claimed_trust_level": outcome.claimed_trust_level,
        }
    )
    assert json.dumps(accepted_result(outcome)) == expected


@pytest.mark.parametrize(
    "receipt",
    [
        parse_json(f'{{"content":{{"action_hash":"{HASH}"}}}}'),
        parse_json('{"content":{"action_hash":7}}'),
        parse_json("[1]"),
    ],
)
@pytest.mark.parametrize(
    "refusal",
    [
        InvalidInput("content: must be present and a JSON object"),
        ReceiptMalformed("Malformed: receipt.alg: required member missing"),
        ReceiptRejected("HashMismatch", None, action_hash=HASH),
        ChainConstraint("chain constraint: fork at seq 3"),
        QuotaExceeded("monthly mirror soft-cap of 10 receipts reached for 2026-11"),
    ],
)
def test_a_refused_result_is_what_the_serializer_writes(receipt: JsonValue, refusal: DomainError):
    expected = _serialized(
        {
            "receipt_id": claimed_action_hash(receipt),
            "accepted": False,
            "rejection_reason": rejection_reason(refusal),
        }
    )
    assert json.dumps(refused_result(receipt, refusal)) == expected
