"""The byte-exact ActionReceipt verifier: pure Python, no Django.

Implements shared/spec/receipts.md with the stricter server rules of server.md §1, and is
tested against the reference vectors in tests/data/vectors.
"""

from apps.receipts.verifier.canonical import canonicalize
from apps.receipts.verifier.chain import ChainDecodeError, link_hash, verify_chain
from apps.receipts.verifier.receipt_text import (
    DecodeError,
    JsonNumber,
    JsonObject,
    JsonValue,
    object_members,
    parse_json,
)
from apps.receipts.verifier.schema import decode_approver_record, decode_content
from apps.receipts.verifier.signatures import (
    DOMAIN_ACTION,
    DOMAIN_APPROVAL,
    DOMAIN_APPROVAL_TOKEN,
    DOMAIN_CHAIN,
    DOMAIN_DECISION,
    DOMAIN_SUSPEND,
    canonical_b64decode,
    verify_ed25519,
)
from apps.receipts.verifier.verify import (
    DecodedReceipt,
    Verdict,
    content_bytes,
    content_hash,
    verify_receipt,
    verify_receipt_value,
)

__all__ = [
    "DOMAIN_ACTION",
    "DOMAIN_APPROVAL",
    "DOMAIN_APPROVAL_TOKEN",
    "DOMAIN_CHAIN",
    "DOMAIN_DECISION",
    "DOMAIN_SUSPEND",
    "ChainDecodeError",
    "DecodeError",
    "DecodedReceipt",
    "JsonNumber",
    "JsonObject",
    "JsonValue",
    "Verdict",
    "canonical_b64decode",
    "canonicalize",
    "content_bytes",
    "content_hash",
    "decode_approver_record",
    "decode_content",
    "link_hash",
    "object_members",
    "parse_json",
    "verify_chain",
    "verify_ed25519",
    "verify_receipt",
    "verify_receipt_value",
]
