"""The approver's device, for tests: mints approval tokens as a real approver signs them.

The service never signs (it holds no key at any level); this lives with the tests only.
"""

from __future__ import annotations

from nacl.signing import SigningKey

from apps.approvals.tokens.token import Decision, approval_token_message, encode_approval_token


def sign_approval_token(
    signing_key: SigningKey,
    *,
    nonce: bytes,
    expiry: int,
    decision: Decision,
    scope: str,
    action_canonical: bytes,
) -> bytes:
    """Mint a token signed with ``signing_key``, as an approver's device would."""
    message = approval_token_message(
        nonce=nonce,
        expiry=expiry,
        decision=decision,
        scope=scope,
        action_canonical=action_canonical,
    )
    signature: bytes = signing_key.sign(message).signature
    public_key: bytes = bytes(signing_key.verify_key)
    return encode_approval_token(
        nonce=nonce,
        expiry=expiry,
        decision=decision,
        scope=scope,
        signature=signature,
        public_key=public_key,
    )
