"""The org mirror chain of server.md §3 (this service's own, versioned construction).

Pure: no Django. ``verify_chain`` (management command) and the browser verifier recompute
exactly these bytes.
"""

from __future__ import annotations

import struct

from blake3 import blake3

DOMAIN = b"receipt-mirror-chain/v1\x00"
# The head of an empty chain; its 32 raw bytes are the zero ``prev`` of seq 1.
EMPTY_CHAIN_HEAD = "0" * 64


def _length_prefixed(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def receipt_digest(stored_receipt: str) -> str:
    """BLAKE3 of the stored receipt text (already JCS, so no re-canonicalization)."""
    return blake3(stored_receipt.encode()).hexdigest()


def chain_hash(
    *,
    prev_chain_hash: str,
    seq: int,
    action_hash: str,
    receipt_digest_hex: str,
    supersedes_action_hash: str = "",
) -> str:
    preimage = b"".join(
        (
            DOMAIN,
            bytes.fromhex(prev_chain_hash),
            struct.pack("<Q", seq),
            _length_prefixed(action_hash.encode("ascii")),
            bytes.fromhex(receipt_digest_hex),
            _length_prefixed(supersedes_action_hash.encode("ascii")),
        )
    )
    return blake3(preimage).hexdigest()
