"""ApproverRecord decoding follows the reference's leniency (approvals.md §4, receipts.md §3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.approvals.tokens import CosignError, decode_record, l1_cosign_payload
from apps.receipts.verifier import DecodeError

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"
KEY = "14wNEuSU2eZDw4twSN8zFhU3BcrJckoBIRKGjc9+lOI="
RECORD = {"decision": "approved", "approver_identity": KEY, "reason": "r", "decided_at": "t"}


def cosign_case(name: str) -> dict[str, str]:
    for case in json.loads((VECTORS / "cosign.json").read_text())["cases"]:
        if case["name"] == name:
            inputs: dict[str, str] = case["inputs"]
            expected: dict[str, str] = case["expected"]
            return {**inputs, **expected}
    raise LookupError(name)


def test_the_sequence_form_decodes_like_the_object_form() -> None:
    assert decode_record(f'["approved", "{KEY}", "r", "t", 30]') == {**RECORD, "sla_minutes": 30}
    assert decode_record(f'["approved", "{KEY}", "r", "t"]') == RECORD


def test_unknown_members_are_dropped() -> None:
    assert decode_record({**RECORD, "note": {"x": 1}}) == RECORD


def test_a_null_sla_is_the_same_as_no_sla() -> None:
    assert decode_record({**RECORD, "sla_minutes": None}) == RECORD


def test_the_decision_may_be_written_as_a_unit_variant_object() -> None:
    assert decode_record({**RECORD, "decision": {"approved": None}}) == RECORD


def test_the_output_lists_members_in_declaration_order() -> None:
    shuffled = '{"sla_minutes": 5, "reason": "r", "decided_at": "t", "decision": "approved", '
    shuffled += f'"approver_identity": "{KEY}"}}'

    assert list(decode_record(shuffled)) == [
        "decision",
        "approver_identity",
        "reason",
        "decided_at",
        "sla_minutes",
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"decision": "approved", "decision": "approved", "approver_identity": "k",'
        ' "reason": "r", "decided_at": "t"}',
        '{"decision": "maybe", "approver_identity": "k", "reason": "r", "decided_at": "t"}',
        '{"decision": "approved", "reason": "r", "decided_at": "t"}',
        '{"decision": "approved", "approver_identity": 1, "reason": "r", "decided_at": "t"}',
        '{"decision": "approved", "approver_identity": "k", "reason": "r", "decided_at": "t",'
        ' "sla_minutes": 1.0}',
        '{"decision": "approved", "approver_identity": "k", "reason": "r", "decided_at": "t",'
        ' "sla_minutes": 4294967296}',
        '["approved", "k", "r", "t", 1, "extra"]',
        '"approved"',
    ],
    ids=[
        "repeated member",
        "unknown decision",
        "missing identity",
        "identity not a string",
        "sla not an integer literal",
        "sla beyond u32",
        "sequence too long",
        "not an object",
    ],
)
def test_a_record_the_reference_refuses_is_refused(text: str) -> None:
    with pytest.raises(DecodeError):
        decode_record(text)


def test_unknown_record_members_do_not_change_the_co_sign_payload() -> None:
    case = cosign_case("l1_payload_ignores_suspended_action_hash")
    record = json.loads(case["approver_record_json"])
    record["comment"] = "not part of the schema"

    payload = l1_cosign_payload(case["suspended_content_json"], json.dumps(record))

    assert payload.hex() == case["payload_hex"]


def test_parsed_and_textual_inputs_give_the_same_payload() -> None:
    case = cosign_case("l1_payload_0")

    payload = l1_cosign_payload(
        json.loads(case["suspended_content_json"]), json.loads(case["approver_record_json"])
    )

    assert payload.hex() == case["payload_hex"]


def test_a_bad_record_is_a_cosign_error_naming_the_function() -> None:
    case = cosign_case("l1_payload_0")

    with pytest.raises(CosignError) as raised:
        l1_cosign_payload(case["suspended_content_json"], '{"decision": "approved"}')

    assert str(raised.value).startswith("l1_cosign_payload: approver record is not valid")
