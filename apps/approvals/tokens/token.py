"""Approval tokens: the wire layout, the signed message and ``verify_approval_token``.

approvals.md §1-§3. A token is one approver's signed vote on one action:

    nonce (32) || expiry (u64 BE) || decision_tag (1) || scope_len (u32 BE) || scope
    || signature (64) || public_key (32)

signed under ``heso-approval-token/v1\\0`` over the same fields (without signature and key)
followed by ``A``, the canonical bytes of the action content.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Collection, Container
from dataclasses import dataclass
from typing import Literal

from apps.approvals.tokens.errors import (
    ApprovalTokenExpired,
    ApprovalTokenInvalidDecision,
    ApprovalTokenInvalidSignature,
    ApprovalTokenMalformed,
    ApprovalTokenOutOfDecision,
    ApprovalTokenOutOfScope,
    ApprovalTokenReplayedNonce,
    ApprovalTokenUnregisteredKey,
)
from apps.receipts.verifier import DOMAIN_APPROVAL_TOKEN, verify_ed25519

Decision = Literal["approved", "rejected"]

DECISION_TAGS: dict[str, int] = {"approved": 0x01, "rejected": 0x02}
_DECISIONS_BY_TAG: dict[int, Decision] = {0x01: "approved", 0x02: "rejected"}

NONCE_LENGTH = 32
SIGNATURE_LENGTH = 64
PUBLIC_KEY_LENGTH = 32
_HEADER = struct.Struct(">32sQBI")  # nonce, expiry, decision_tag, scope_len: 45 bytes
MIN_TOKEN_LENGTH = _HEADER.size + SIGNATURE_LENGTH + PUBLIC_KEY_LENGTH  # 141, empty scope
_U64_MAX = 2**64 - 1


@dataclass(frozen=True)
class TokenClaims:
    """What a verified token asserts (approvals.md §3, "Success returns")."""

    nonce: bytes
    expiry_unix_secs: int
    decision: Decision
    scope: str
    approver_public_key: str  # standard padded base64 of the 32-byte key


def approval_token_message(
    *, nonce: bytes, expiry: int, decision: Decision, scope: str, action_canonical: bytes
) -> bytes:
    """The exact bytes an approver signs (approvals.md §2)."""
    return DOMAIN_APPROVAL_TOKEN + _fields(nonce, expiry, decision, scope) + action_canonical


def encode_approval_token(
    *,
    nonce: bytes,
    expiry: int,
    decision: Decision,
    scope: str,
    signature: bytes,
    public_key: bytes,
) -> bytes:
    """The wire blob of approvals.md §1 from its parts (no signing, no checks on the signature)."""
    if len(signature) != SIGNATURE_LENGTH:
        raise ValueError("signature must be 64 bytes")
    if len(public_key) != PUBLIC_KEY_LENGTH:
        raise ValueError("public_key must be 32 bytes")
    return _fields(nonce, expiry, decision, scope) + signature + public_key


def _fields(nonce: bytes, expiry: int, decision: Decision, scope: str) -> bytes:
    if len(nonce) != NONCE_LENGTH:
        raise ValueError("nonce must be 32 bytes")
    if not 0 <= expiry <= _U64_MAX:
        raise ValueError("expiry must fit an unsigned 64-bit integer")
    if decision not in DECISION_TAGS:
        raise ValueError("decision must be 'approved' or 'rejected'")
    scope_bytes = scope.encode("utf-8")
    return _HEADER.pack(nonce, expiry, DECISION_TAGS[decision], len(scope_bytes)) + scope_bytes


def token_decision(token: bytes) -> Decision | None:
    """The decision a token's tag carries, read from the layout without verifying anything
    (the signature covers the tag; ``verify_approval_token`` refuses a bad one). None when
    the token is too short to hold a tag or the tag is not a decision."""
    if len(token) < _HEADER.size:
        return None
    return _DECISIONS_BY_TAG.get(token[NONCE_LENGTH + 8])


def token_public_key(token: bytes) -> str | None:
    """The signer's key a token names (its last 32 bytes), as padded base64; unverified."""
    if len(token) < MIN_TOKEN_LENGTH:
        return None
    return base64.b64encode(token[-PUBLIC_KEY_LENGTH:]).decode("ascii")


def verify_approval_token(
    token: bytes,
    *,
    action_canonical: bytes,
    now_unix_secs: int,
    seen_nonces: Container[bytes],
    required_scope: str,
    required_decision: str,
    registered_pubkeys_b64: Collection[str],
) -> TokenClaims:
    """Check ``token`` exactly as the reference does (approvals.md §3) and return its claims.

    The checks run in the reference's order and the first failure raises its
    ``ApprovalTokenError`` subclass with the reference message. Registered keys are compared
    as exact strings: callers must store them as canonical padded base64. The function is
    stateless: the caller supplies the clock and the nonces already accepted, and records the
    nonce only after a success.
    """
    if required_decision not in DECISION_TAGS:
        raise ValueError(
            f"required_decision must be 'approved' or 'rejected', not {required_decision!r}"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise ApprovalTokenMalformed("malformed: token too short")
    nonce, expiry, tag, scope_len = _HEADER.unpack_from(token)
    decision = _DECISIONS_BY_TAG.get(tag)
    if decision is None:
        raise ApprovalTokenInvalidDecision(
            f"invalid decision tag 0x{tag:02x} (expected 0x01=approve, 0x02=reject)"
        )
    scope_end = _HEADER.size + scope_len
    end = scope_end + SIGNATURE_LENGTH + PUBLIC_KEY_LENGTH
    if end > len(token):
        raise ApprovalTokenMalformed("malformed: token truncated after scope_len")
    try:
        scope = token[_HEADER.size : scope_end].decode("utf-8")
    except UnicodeDecodeError:
        raise ApprovalTokenMalformed("malformed: scope is not valid UTF-8") from None
    if end != len(token):
        raise ApprovalTokenMalformed("malformed: trailing bytes after pubkey")
    signature = token[scope_end : scope_end + SIGNATURE_LENGTH]
    public_key_b64 = base64.b64encode(token[scope_end + SIGNATURE_LENGTH : end]).decode("ascii")
    # Allowlist before any signature work: an unregistered key costs no verification.
    if public_key_b64 not in registered_pubkeys_b64:
        raise ApprovalTokenUnregisteredKey("approver public key is not registered")
    message = DOMAIN_APPROVAL_TOKEN + token[:scope_end] + action_canonical
    signature_b64 = base64.b64encode(signature).decode("ascii")
    if verify_ed25519(public_key_b64, signature_b64, message) is not None:
        raise ApprovalTokenInvalidSignature("approval token signature invalid")
    if now_unix_secs > expiry:
        raise ApprovalTokenExpired(f"expired (expiry={expiry}, now={now_unix_secs})")
    if nonce in seen_nonces:
        raise ApprovalTokenReplayedNonce("approval token nonce has been replayed")
    if scope != required_scope:
        raise ApprovalTokenOutOfScope(
            f"scope `{scope}` does not exactly match required `{required_scope}`"
        )
    if decision != required_decision:
        raise ApprovalTokenOutOfDecision(
            f"token decision `{decision}` does not match required `{required_decision}`"
        )
    return TokenClaims(
        nonce=nonce,
        expiry_unix_secs=expiry,
        decision=decision,
        scope=scope,
        approver_public_key=public_key_b64,
    )
