"""Approval tokens, co-signature payloads and L1 assembly: pure Python, no Django.

Implements shared/spec/approvals.md §1-§8.1 byte-exactly against the reference vectors in
tests/data/vectors (approval_tokens.json, cosign.json), on top of the receipt verifier's
decoding, canonical bytes and strict Ed25519.
"""

from apps.approvals.tokens.assembly import (
    assemble_l1_from_parts,
    assemble_quorum_from_parts,
    receipt_text,
)
from apps.approvals.tokens.cosign import l1_cosign_payload, quorum_cosign_payload
from apps.approvals.tokens.errors import (
    ApprovalTokenError,
    ApprovalTokenExpired,
    ApprovalTokenInvalidDecision,
    ApprovalTokenInvalidSignature,
    ApprovalTokenMalformed,
    ApprovalTokenOutOfDecision,
    ApprovalTokenOutOfScope,
    ApprovalTokenReplayedNonce,
    ApprovalTokenUnregisteredKey,
    CosignError,
    LegRejected,
    OperatorKeyMismatch,
)
from apps.approvals.tokens.legs import verify_leg
from apps.approvals.tokens.record import decode_record
from apps.approvals.tokens.token import (
    MIN_TOKEN_LENGTH,
    TokenClaims,
    approval_token_message,
    encode_approval_token,
    token_decision,
    token_public_key,
    verify_approval_token,
)

__all__ = [
    "MIN_TOKEN_LENGTH",
    "ApprovalTokenError",
    "ApprovalTokenExpired",
    "ApprovalTokenInvalidDecision",
    "ApprovalTokenInvalidSignature",
    "ApprovalTokenMalformed",
    "ApprovalTokenOutOfDecision",
    "ApprovalTokenOutOfScope",
    "ApprovalTokenReplayedNonce",
    "ApprovalTokenUnregisteredKey",
    "CosignError",
    "LegRejected",
    "OperatorKeyMismatch",
    "TokenClaims",
    "approval_token_message",
    "assemble_l1_from_parts",
    "assemble_quorum_from_parts",
    "decode_record",
    "encode_approval_token",
    "l1_cosign_payload",
    "quorum_cosign_payload",
    "receipt_text",
    "token_decision",
    "token_public_key",
    "verify_approval_token",
    "verify_leg",
]
