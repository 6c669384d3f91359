"""The server's check of a submitted co-signature leg (approvals.md §8.1), end to end with
the operator-side assembly: a leg ``verify_leg`` accepts must assemble into a Valid L1."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from apps.approvals.tokens import (
    LegRejected,
    assemble_l1_from_parts,
    assemble_quorum_from_parts,
    l1_cosign_payload,
    quorum_cosign_payload,
    receipt_text,
    verify_leg,
)
from apps.receipts.verifier import verify_receipt

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"


def vector_inputs(name: str) -> dict[str, Any]:
    for case in json.loads((VECTORS / "cosign.json").read_text())["cases"]:
        if case["name"] == name:
            inputs: dict[str, Any] = case["inputs"]
            return inputs
    raise LookupError(name)


# A suspended L0 body and the operator key that signed it, from the reference vectors.
SUSPENDED = vector_inputs("assemble_l1_0")["suspended_content_json"]
OPERATOR = SigningKey(bytes.fromhex(vector_inputs("assemble_l1_0")["operator_seed_hex"]))
APPROVERS = [SigningKey(bytes([seed]) * 32) for seed in (1, 2, 3)]


def b64(key: SigningKey) -> str:
    return base64.b64encode(bytes(key.verify_key)).decode("ascii")


def record_for(key: SigningKey, **overrides: Any) -> str:
    record = {
        "decision": "approved",
        "approver_identity": b64(key),
        "reason": "looks right",
        "decided_at": "2026-06-05T08:00:00Z",
        **overrides,
    }
    return json.dumps(record)


def co_sign(key: SigningKey, payload: bytes) -> str:
    return base64.b64encode(key.sign(payload).signature).decode("ascii")


ROSTER = sorted(b64(key) for key in APPROVERS)


def single_leg(key: SigningKey, record: str | None = None) -> dict[str, Any]:
    record = record_for(key) if record is None else record
    return {
        "record_text": record,
        "approver_pubkey_b64": b64(key),
        "co_sig_b64": co_sign(key, l1_cosign_payload(SUSPENDED, record)),
    }


def quorum_leg(key: SigningKey, record: str | None = None) -> dict[str, Any]:
    record = record_for(key) if record is None else record
    return {
        "record_text": record,
        "approver_pubkey_b64": b64(key),
        "co_sig_b64": co_sign(key, quorum_cosign_payload(SUSPENDED, 2, ROSTER, record)),
    }


def check(leg: dict[str, Any], *, threshold: int = 1, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "suspended_content": SUSPENDED,
        "threshold": threshold,
        "roster": ROSTER,
        "registered_pubkeys_b64": ROSTER,
        **leg,
        **overrides,
    }
    return verify_leg(**arguments)


def rejection(leg: dict[str, Any], **arguments: Any) -> str:
    with pytest.raises(LegRejected) as raised:
        check(leg, **arguments)
    return raised.value.code


def test_an_accepted_single_leg_assembles_into_a_valid_l1_receipt() -> None:
    leg = single_leg(APPROVERS[0])

    record = check(leg)
    receipt = assemble_l1_from_parts(
        OPERATOR,
        suspended_content=SUSPENDED,
        record=leg["record_text"],
        approver_pubkey_b64=leg["approver_pubkey_b64"],
        co_sig_b64=leg["co_sig_b64"],
    )

    assert record["approver_identity"] == b64(APPROVERS[0])
    assert verify_receipt(receipt_text(receipt)).as_dict() == {
        "kind": "Valid",
        "trust_level": "L1",
        "time_status": "NoTrustedTime",
    }


def test_accepted_quorum_legs_assemble_into_a_valid_quorum_receipt() -> None:
    legs = [quorum_leg(APPROVERS[2]), quorum_leg(APPROVERS[0])]
    for leg in legs:
        check(leg, threshold=2)

    receipt = assemble_quorum_from_parts(
        OPERATOR,
        suspended_content=SUSPENDED,
        threshold=2,
        roster=ROSTER,
        parts=[
            {
                "record": leg["record_text"],
                "approver_pubkey_b64": leg["approver_pubkey_b64"],
                "co_sig_b64": leg["co_sig_b64"],
            }
            for leg in legs
        ],
    )

    verdict = verify_receipt(receipt_text(receipt))
    assert (verdict.kind, verdict.trust_level) == ("Valid", "L1")
    assert receipt["content"]["multi_approval"]["threshold"] == 2


def test_a_key_that_is_not_a_registered_approver_key_is_refused() -> None:
    outsider = SigningKey(b"\x09" * 32)

    assert rejection(single_leg(outsider)) == "not_registered"


def test_a_quorum_leg_from_a_key_registered_after_the_roster_froze_is_refused() -> None:
    late = SigningKey(b"\x09" * 32)

    code = rejection(quorum_leg(late), threshold=2, registered_pubkeys_b64=[*ROSTER, b64(late)])

    assert code == "not_on_roster"


def test_the_agents_own_key_cannot_co_sign_its_action() -> None:
    registered = [*ROSTER, b64(OPERATOR)]

    assert rejection(single_leg(OPERATOR), registered_pubkeys_b64=registered) == "self_approval"


def test_a_second_leg_from_the_same_key_is_refused() -> None:
    leg = quorum_leg(APPROVERS[1])

    assert rejection(leg, threshold=2, signed_keys={b64(APPROVERS[1])}) == "duplicate_leg"


def test_a_single_leg_whose_record_names_another_approver_is_refused() -> None:
    leg = single_leg(APPROVERS[0], record_for(APPROVERS[1]))

    assert rejection(leg) == "identity_mismatch"


def test_a_quorum_leg_whose_record_names_another_approver_is_refused() -> None:
    leg = quorum_leg(APPROVERS[0], record_for(APPROVERS[1]))

    assert rejection(leg, threshold=2) == "identity_mismatch"


def test_a_rejected_record_cannot_be_a_leg() -> None:
    leg = single_leg(APPROVERS[0], record_for(APPROVERS[0], decision="rejected"))

    assert rejection(leg) == "not_approved"


def test_a_single_payload_signature_does_not_count_in_the_quorum_lane() -> None:
    assert rejection(single_leg(APPROVERS[0]), threshold=2) == "bad_signature"


def test_a_quorum_payload_signature_does_not_count_in_the_single_lane() -> None:
    assert rejection(quorum_leg(APPROVERS[0])) == "bad_signature"


def test_a_co_signature_that_is_not_base64_is_refused() -> None:
    leg = {**single_leg(APPROVERS[0]), "co_sig_b64": "not base64"}

    assert rejection(leg) == "bad_signature"


def test_a_record_that_does_not_decode_is_refused() -> None:
    leg = {**single_leg(APPROVERS[0]), "record_text": '{"decision": "approved"'}

    assert rejection(leg) == "malformed_record"


def test_a_suspended_body_that_carries_a_time_anchor_is_refused() -> None:
    anchored = vector_inputs("l1_payload_rejects_carries_anchor")["suspended_content_json"]

    assert rejection(single_leg(APPROVERS[0]), suspended_content=anchored) == (
        "suspended_content_invalid"
    )


def test_a_threshold_below_one_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="threshold"):
        check(single_leg(APPROVERS[0]), threshold=0)
