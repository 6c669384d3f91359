"""Every approval-token and co-signature reference vector, one test each (approvals.md §11).

Assembled receipts are compared byte for byte with the reference's ``receipt_json`` and
re-verified with the receipt verifier, which must give the reference's verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from apps.approvals.tokens import (
    ApprovalTokenError,
    CosignError,
    approval_token_message,
    assemble_l1_from_parts,
    assemble_quorum_from_parts,
    l1_cosign_payload,
    quorum_cosign_payload,
    receipt_text,
    verify_approval_token,
)
from apps.receipts.verifier import verify_receipt

VECTORS = Path(__file__).resolve().parents[2] / "data" / "vectors"


def cases(name: str) -> list[Any]:
    document = json.loads((VECTORS / f"{name}.json").read_text())
    return [pytest.param(case, id=case["name"]) for case in document["cases"]]


TOKEN_CASES = cases("approval_tokens")
COSIGN_CASES = cases("cosign")


def test_the_vector_files_hold_the_expected_number_of_cases() -> None:
    assert len(TOKEN_CASES) == 35
    assert len(COSIGN_CASES) == 34


@pytest.mark.parametrize("case", TOKEN_CASES)
def test_verify_approval_token_agrees_with_the_reference(case: dict[str, Any]) -> None:
    inputs, expected = case["inputs"], case["expected"]
    token = bytes.fromhex(inputs["token_hex"])
    action_canonical = bytes.fromhex(inputs["action_canonical_hex"])

    def verify() -> Any:
        return verify_approval_token(
            token,
            action_canonical=action_canonical,
            now_unix_secs=inputs["now_unix_secs"],
            seen_nonces={bytes.fromhex(nonce) for nonce in inputs["seen_nonces_hex"]},
            required_scope=inputs["required_scope"],
            required_decision=inputs["required_decision"],
            registered_pubkeys_b64=inputs["registered_pubkeys_b64"],
        )

    if not expected["ok"]:
        with pytest.raises(ApprovalTokenError) as raised:
            verify()
        assert type(raised.value).reference_name == expected["error"]
        assert str(raised.value) == expected["message"]
        return
    claims = verify()
    assert {
        "nonce_hex": claims.nonce.hex(),
        "expiry_unix_secs": claims.expiry_unix_secs,
        "decision": claims.decision,
        "scope": claims.scope,
        "approver_public_key": claims.approver_public_key,
    } == expected["claims"]
    signed = approval_token_message(
        nonce=claims.nonce,
        expiry=claims.expiry_unix_secs,
        decision=claims.decision,
        scope=claims.scope,
        action_canonical=action_canonical,
    )
    assert signed.hex() == case["derived"]["signed_payload_hex"]


def run_cosign_op(op: str, inputs: dict[str, Any]) -> Any:
    if op == "l1_cosign_payload":
        return l1_cosign_payload(inputs["suspended_content_json"], inputs["approver_record_json"])
    if op == "quorum_cosign_payload":
        return quorum_cosign_payload(
            inputs["suspended_content_json"],
            inputs["threshold"],
            json.loads(inputs["roster_json"]),
            inputs["approver_record_json"],
        )
    operator_key = SigningKey(bytes.fromhex(inputs["operator_seed_hex"]))
    if op == "assemble_l1":
        return assemble_l1_from_parts(
            operator_key,
            suspended_content=inputs["suspended_content_json"],
            record=inputs["approver_record_json"],
            approver_pubkey_b64=inputs["approver_pubkey_b64"],
            co_sig_b64=inputs["detached_sig_b64"],
        )
    assert op == "assemble_quorum"
    return assemble_quorum_from_parts(
        operator_key,
        suspended_content=inputs["suspended_content_json"],
        threshold=inputs["threshold"],
        roster=json.loads(inputs["roster_json"]),
        parts=json.loads(inputs["parts_json"]),
    )


@pytest.mark.parametrize("case", COSIGN_CASES)
def test_cosign_and_assembly_agree_with_the_reference(case: dict[str, Any]) -> None:
    op, inputs, expected = case["op"], case["inputs"], case["expected"]
    if not expected["ok"]:
        with pytest.raises(CosignError) as raised:
            run_cosign_op(op, inputs)
        assert type(raised.value).reference_name == expected["error_type"]
        assert str(raised.value) == expected["error_message"]
        return
    result = run_cosign_op(op, inputs)
    if op.endswith("_payload"):
        assert result.hex() == expected["payload_hex"]
        return
    text = receipt_text(result)
    assert text == expected["receipt_json"]
    assert verify_receipt(text).as_dict() == expected["verdict"]
