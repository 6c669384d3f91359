"""Every receipt-related reference vector, one test each.

The verifier must agree with the heso 0.5.1 reference on kind, trust level and detail,
except where server.md §1 refuses a lenient spelling on purpose: those cases are listed in
DELIBERATE below, each with its reason, and must come out Malformed at the decode stage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.receipts.verifier import (
    ChainDecodeError,
    DecodeError,
    canonicalize,
    content_hash,
    decode_content,
    link_hash,
    parse_json,
    verify_chain,
    verify_receipt,
)

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"

DELIBERATE = {
    # server.md §1 row: unknown member in any schema object
    "l0_signature_entry_extra_keys": "unknown member in a signature entry",
    "quirk_unknown_nested_key_ignored": "unknown member in content.action",
    "unknown_key_in_action_dropped": "unknown member in content.action",
    "unknown_key_in_matched_condition_dropped": "unknown member in a matched condition",
    # server.md §1 row: sequence form
    "quirk_envelope_sequence_form": "envelope as an array",
    "quirk_signature_entry_sequence_form": "signature entry as an array",
    "quirk_content_sequence_form_prefix": "content as an array",
    "struct_sequence_form_action": "action as an array",
    "struct_sequence_form_condition": "matched condition as an array",
    # server.md §1 row: null for an optional member
    "quirk_null_optional_equals_absent": "null target_host",
    "null_optional_is_absent": "null target_host",
    # server.md §1 row: enum written as a one-member object
    "quirk_enum_map_form": "verb as {name: null}",
    "enum_map_form": "verb as {name: null}",
    "unit_variant_map_form": "surface as {name: null}",
    # server.md §1 row: repeated member name anywhere, free-form fields included
    "quirk_fields_duplicate_last_wins": "repeated name in fields",
    "quirk_fields_duplicate_first_signed": "repeated name in fields",
    "fields_duplicate_key_last_wins": "repeated name in fields",
    # server.md §1 row: default-valued member written out
    "quirk_default_bool_members_ignored": "false written out",
    "default_valued_fields_omitted": "false / [] written out",
    "empty_collateral_omitted": "[] written out",
}

# server.md §1, last paragraph: lifecycle kinds are held to the suite tags; the level is
# derived (L0 offline), never echoed and never refused: a differing claim is reported.
LIFECYCLE_STRICTER = {
    "suspended_wrong_alg_not_checked": {"kind": "WrongAlgorithm", "detail": "bogus"},
    "suspended_v1_version_not_checked": {"kind": "Unsupported"},
    "suspended_claims_L1_not_checked": {"kind": "Valid", "claimed_trust_level": "L1"},
}

# Details the spec does not fix: RFC 3161 ASN.1 library messages (receipts.md §16).
ASN1_DETAIL = {"anchor_not_cms", "anchor_with_required_policy"}


def cases(*names: str, op: str | None = None) -> list[Any]:
    found = []
    for name in names:
        for case in json.loads((VECTORS / f"{name}.json").read_text())["cases"]:
            if op is None or case["op"] == op:
                found.append(pytest.param(case, id=f"{name}:{case['name']}"))
    return found


def assert_deliberately_malformed(verdict: Any) -> None:
    assert verdict.kind == "Malformed"
    assert verdict.stage == "decode"


@pytest.mark.parametrize(
    "case", cases("receipts_valid", "receipts_invalid", "decoding_quirks", "ed25519_edge")
)
def test_receipt_verdicts_agree_with_the_reference(case):
    verdict = verify_receipt(case["inputs"]["receipt_json"])
    if case["name"] in DELIBERATE:
        assert_deliberately_malformed(verdict)
        return
    expected = case["expected"]["verdict"]
    assert verdict.kind == expected["kind"]
    assert verdict.trust_level == expected.get("trust_level")
    assert verdict.as_dict()["time_status"] == expected["time_status"]
    if verdict.stage == "decode":
        assert verdict.detail.startswith("input is not a well-formed action receipt: ")
    elif case["name"] not in ASN1_DETAIL:
        assert verdict.detail == expected.get("detail")


@pytest.mark.parametrize("case", cases("lifecycle"))
def test_lifecycle_verdicts_agree_with_the_reference_and_the_server_rules(case):
    verdict = verify_receipt(case["inputs"]["receipt_json"])
    expected = LIFECYCLE_STRICTER.get(case["name"], case["expected"]["verdict"])
    assert verdict.kind == expected["kind"]
    if "detail" in expected:
        assert verdict.detail == expected["detail"]
    if verdict.is_valid:
        assert verdict.trust_level == "L0"  # never the claimed level
        assert verdict.claimed_trust_level == expected.get("claimed_trust_level")
        assert verdict.as_dict().get("claimed_trust_level") == expected.get("claimed_trust_level")


@pytest.mark.parametrize("case", cases("canonicalization"))
def test_canonical_bytes_and_action_hash_agree_with_the_reference(case):
    expected = case["expected"]
    if case["name"] in DELIBERATE:
        with pytest.raises(DecodeError):
            decode_content(parse_json(case["inputs"]["content_json"]))
        return
    if not expected["ok"]:
        with pytest.raises(DecodeError):
            decode_content(parse_json(case["inputs"]["content_json"]))
        return
    content = decode_content(parse_json(case["inputs"]["content_json"]))
    canonical = canonicalize({k: v for k, v in content.items() if k != "action_hash"})
    assert canonical.hex() == expected["canonical_hex"]
    assert content_hash(content) == expected["action_hash"]


@pytest.mark.parametrize("case", cases("chains", op="link_hash"))
def test_link_hashes_agree_with_the_reference(case):
    content = decode_content(parse_json(case["inputs"]["content_json"]))
    assert link_hash(content) == case["expected"]["link_hash"]


@pytest.mark.parametrize("case", cases("chains", op="verify_chain"))
def test_chain_outcomes_agree_with_the_reference(case):
    elements = list(parse_json(case["inputs"]["chain_json"]))
    expected = case["expected"]["outcome"]
    outcome = verify_chain(elements)
    assert outcome["kind"] == expected["kind"]
    for key in ("seq", "length", "receipt_kind", "detail"):
        assert outcome.get(key) == expected.get(key)
    if "reason" in expected:
        assert expected["reason"].startswith(outcome["reason"])


def test_a_chain_element_that_does_not_decode_is_an_input_error():
    with pytest.raises(ChainDecodeError, match="parse chain"):
        verify_chain(["{}"])


def test_the_deliberate_list_names_only_existing_cases():
    names = {
        case.values[0]["name"]
        for case in cases(
            "receipts_valid", "receipts_invalid", "decoding_quirks", "canonicalization"
        )
    }
    assert set(DELIBERATE) <= names
    assert set(LIFECYCLE_STRICTER) <= {case.values[0]["name"] for case in cases("lifecycle")}
