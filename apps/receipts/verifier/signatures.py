"""Signing domains and strict Ed25519 acceptance (receipts.md §6-7).

PyNaCl (libsodium) agrees with the reference's ``verify_strict`` on every edge vector;
OpenSSL-backed Ed25519 does not (it accepts small-order keys and R values).
"""

from __future__ import annotations

import binascii

from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError, CryptoError

DOMAIN_ACTION = b"heso-action/v1\x00"
DOMAIN_APPROVAL = b"heso-approval/v1\x00"
DOMAIN_APPROVAL_TOKEN = b"heso-approval-token/v1\x00"
DOMAIN_SUSPEND = b"heso-action-suspend/v1\x00"
DOMAIN_DECISION = b"heso-action-decision/v1\x00"
DOMAIN_CHAIN = b"heso-rcpt-chain/v1\x00"


def canonical_b64decode(text: str) -> bytes | None:
    """Decode standard padded base64, refusing any spelling that does not re-encode alike."""
    # binascii directly: base64.b64decode(validate=True) runs a regex first, which cost
    # more than the decoding on the verify path (four decodes per L1 receipt).
    try:
        decoded = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    if binascii.b2a_base64(decoded, newline=False) != text.encode("ascii", "replace"):
        return None
    return decoded


_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P


def is_on_curve(raw_key: bytes) -> bool:
    """Whether the 32 bytes decompress to an Edwards point (as the reference decompresses).

    Only asked on the failure path: a signature that verifies proves the key is on the curve.
    """
    y = (int.from_bytes(raw_key, "little") & ((1 << 255) - 1)) % _P
    y2 = y * y % _P
    x2 = (y2 - 1) * pow(_D * y2 + 1, _P - 2, _P) % _P
    return x2 == 0 or pow(x2, (_P - 1) // 2, _P) == 1


def verify_ed25519(public_key_b64: str, signature_b64: str, message: bytes) -> str | None:
    """None when ``signature_b64`` verifies over ``message``, else the §7 failure detail.

    The checks run in the reference's order: key encoding, key length, key on the curve,
    signature encoding, signature length, strict verification.
    """
    raw_key = canonical_b64decode(public_key_b64)
    if raw_key is None:
        return "malformed signature envelope: public_key not base64"
    if len(raw_key) != 32:
        return "malformed signature envelope: public_key wrong length"
    signature = canonical_b64decode(signature_b64)
    if signature is not None and len(signature) == 64:
        try:
            # libsodium's strict verify (what VerifyKey.verify calls, minus the wrapper).
            crypto_sign_open(signature + message, raw_key)
            return None
        except (BadSignatureError, CryptoError, ValueError):
            pass
    if not is_on_curve(raw_key):
        return "malformed signature envelope: public_key not on curve"
    if signature is None:
        return "malformed signature envelope: signature not base64"
    if len(signature) != 64:
        return "malformed signature envelope: signature wrong length"
    return "signature verification failed"
