"""Focused checks of the approval-token rules (approvals.md §1-§3) on freshly minted tokens."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from nacl.signing import SigningKey

from apps.approvals.tokens import (
    MIN_TOKEN_LENGTH,
    ApprovalTokenError,
    ApprovalTokenExpired,
    ApprovalTokenInvalidDecision,
    ApprovalTokenInvalidSignature,
    ApprovalTokenMalformed,
    ApprovalTokenUnregisteredKey,
    TokenClaims,
    encode_approval_token,
    verify_approval_token,
)
from tests.approvals.signing import sign_approval_token

ACTION = b'{"action":{"verb":"payment"}}'
NONCE = bytes(range(32))
EXPIRY = 1_900_000_000
SCOPE = "payment.large.requires_approval"
DECISION_OFFSET = 40


@pytest.fixture
def approver() -> SigningKey:
    return SigningKey(b"\x07" * 32)


def key_b64(key: SigningKey) -> str:
    return base64.b64encode(bytes(key.verify_key)).decode("ascii")


def mint(approver: SigningKey, **overrides: Any) -> bytes:
    fields: dict[str, Any] = {
        "nonce": NONCE,
        "expiry": EXPIRY,
        "decision": "approved",
        "scope": SCOPE,
        "action_canonical": ACTION,
    }
    fields.update(overrides)
    return sign_approval_token(approver, **fields)


def verify(token: bytes, approver: SigningKey, **overrides: Any) -> TokenClaims:
    arguments: dict[str, Any] = {
        "action_canonical": ACTION,
        "now_unix_secs": EXPIRY - 60,
        "seen_nonces": set(),
        "required_scope": SCOPE,
        "required_decision": "approved",
        "registered_pubkeys_b64": [key_b64(approver)],
    }
    arguments.update(overrides)
    return verify_approval_token(token, **arguments)


def test_a_freshly_signed_token_verifies_and_reports_its_claims(approver: SigningKey) -> None:
    claims = verify(mint(approver), approver)

    assert claims == TokenClaims(
        nonce=NONCE,
        expiry_unix_secs=EXPIRY,
        decision="approved",
        scope=SCOPE,
        approver_public_key=key_b64(approver),
    )


def test_a_token_at_exactly_its_expiry_instant_is_still_valid(approver: SigningKey) -> None:
    assert verify(mint(approver), approver, now_unix_secs=EXPIRY).expiry_unix_secs == EXPIRY


def test_a_token_one_second_past_its_expiry_is_expired(approver: SigningKey) -> None:
    with pytest.raises(ApprovalTokenExpired) as raised:
        verify(mint(approver), approver, now_unix_secs=EXPIRY + 1)

    assert str(raised.value) == "expired (expiry=1900000000, now=1900000001)"


def test_flipping_the_decision_byte_breaks_the_signature(approver: SigningKey) -> None:
    token = bytearray(mint(approver, decision="approved"))
    token[DECISION_OFFSET] = 0x02

    with pytest.raises(ApprovalTokenInvalidSignature) as raised:
        verify(bytes(token), approver, required_decision="rejected")

    assert str(raised.value) == "approval token signature invalid"


def test_an_unpadded_copy_of_the_registered_key_is_not_registered(approver: SigningKey) -> None:
    unpadded = key_b64(approver).rstrip("=")

    with pytest.raises(ApprovalTokenUnregisteredKey) as raised:
        verify(mint(approver), approver, registered_pubkeys_b64=[unpadded])

    assert str(raised.value) == "approver public key is not registered"


def test_a_token_signed_for_other_action_bytes_has_an_invalid_signature(
    approver: SigningKey,
) -> None:
    with pytest.raises(ApprovalTokenInvalidSignature):
        verify(mint(approver, action_canonical=ACTION + b" "), approver)


def test_an_unknown_required_decision_is_refused_before_the_token_is_parsed(
    approver: SigningKey,
) -> None:
    with pytest.raises(ValueError, match="required_decision") as raised:
        verify(b"", approver, required_decision="escalated")

    assert not isinstance(raised.value, ApprovalTokenError)


def test_an_invalid_decision_tag_is_a_kind_of_malformed_token(approver: SigningKey) -> None:
    token = bytearray(mint(approver))
    token[DECISION_OFFSET] = 0x03

    with pytest.raises(ApprovalTokenMalformed) as raised:
        verify(bytes(token), approver)

    assert isinstance(raised.value, ApprovalTokenInvalidDecision)
    assert raised.value.reference_name == "HesoApprovalTokenInvalidDecision"


def test_the_shortest_token_has_an_empty_scope(approver: SigningKey) -> None:
    token = mint(approver, scope="")

    assert len(token) == MIN_TOKEN_LENGTH == 141
    assert verify(token, approver, required_scope="").scope == ""


def test_a_non_ascii_scope_is_counted_in_bytes(approver: SigningKey) -> None:
    token = mint(approver, scope="paiement.été")

    assert len(token) == MIN_TOKEN_LENGTH + len("paiement.été".encode())
    assert verify(token, approver, required_scope="paiement.été").scope == "paiement.été"


def test_encoding_refuses_parts_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="signature"):
        encode_approval_token(
            nonce=NONCE,
            expiry=EXPIRY,
            decision="approved",
            scope=SCOPE,
            signature=b"\x00" * 63,
            public_key=b"\x00" * 32,
        )
    with pytest.raises(ValueError, match="nonce"):
        encode_approval_token(
            nonce=b"\x00",
            expiry=EXPIRY,
            decision="approved",
            scope=SCOPE,
            signature=b"\x00" * 64,
            public_key=b"\x00" * 32,
        )
