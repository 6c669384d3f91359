"""Link hashes and session-chain verification (receipts.md §13.1-13.2)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from blake3 import blake3

from apps.receipts.verifier.receipt_text import DecodeError, JsonValue, parse_json
from apps.receipts.verifier.signatures import DOMAIN_CHAIN
from apps.receipts.verifier.verify import verify_receipt_value


def _length_prefixed(data: bytes) -> bytes:
    return struct.pack("<Q", len(data)) + data


def link_hash(content: dict[str, Any]) -> str:
    """The link of a receipt's content: what its successor's ``prev_receipt_hash`` holds."""
    link_input = (
        DOMAIN_CHAIN
        + _length_prefixed((content.get("session_id") or "").encode("utf-8"))
        + _length_prefixed(struct.pack("<Q", content.get("seq") or 0))
        + _length_prefixed(content["action_hash"].encode("ascii"))
    )
    return blake3(link_input).hexdigest()


class ChainDecodeError(DecodeError):
    """An element of the chain does not decode: an input error, not a chain outcome."""


def verify_chain(receipts: Sequence[bytes | str | JsonValue]) -> dict[str, Any]:
    """``verify_action_receipt_chain``: the outcome object of receipts.md §13.2."""
    if not receipts:
        return {"kind": "Empty"}
    decoded = []
    for index, raw in enumerate(receipts):
        value = parse_json(raw) if isinstance(raw, bytes | str) else raw
        verdict = verify_receipt_value(value)
        if verdict.receipt is None:
            raise ChainDecodeError(f"parse chain: element {index}: {verdict.detail}")
        decoded.append(verdict)
    for verdict in decoded:
        receipt = verdict.receipt
        assert receipt is not None
        seq = receipt.seq or 0
        if receipt.kind != "action":
            return {
                "kind": "WrongChainKind",
                "seq": seq,
                "receipt_kind": receipt.kind.title().replace("_", ""),
            }
        if not verdict.is_valid:
            return {"kind": "ContentTamper", "seq": seq, "reason": verdict.kind}
    return _check_links([v.receipt.content for v in decoded if v.receipt is not None])


def _check_links(contents: list[dict[str, Any]]) -> dict[str, Any]:
    genesis = contents[0]
    if "session_id" not in genesis or "seq" not in genesis:
        return _broken(0, "genesis receipt carries no chain block (session_id + seq required)")
    if genesis["seq"] != 0:
        return _broken(genesis["seq"], f"genesis receipt has seq {genesis['seq']}, expected 0")
    if genesis.get("prev_receipt_hash"):
        return _broken(0, "genesis receipt must carry no prev_receipt_hash")
    previous = genesis
    for expected, content in enumerate(contents[1:], start=1):
        if "session_id" not in content or "seq" not in content:
            return _broken(expected, "non-genesis receipt carries no chain block")
        seq = content["seq"]
        if content["session_id"] != genesis["session_id"]:
            return _broken(
                seq,
                f"session_id changed mid-chain: `{content['session_id']}` != genesis "
                f"`{genesis['session_id']}`",
            )
        if seq != expected:
            return _broken(
                seq,
                f"seq {seq} out of order (expected {expected}); a drop, reorder, or insert "
                "breaks the chain",
            )
        if "prev_receipt_hash" not in content:
            return _broken(seq, "non-genesis receipt carries no prev_receipt_hash")
        want = link_hash(previous)
        if content["prev_receipt_hash"] != want:
            return _broken(
                seq,
                f"prev_receipt_hash {content['prev_receipt_hash']} != recomputed link {want} "
                f"of seq {previous['seq']}",
            )
        previous = content
    return {"kind": "Valid", "length": len(contents)}


def _broken(seq: int, detail: str) -> dict[str, Any]:
    return {"kind": "LinkBroken", "seq": seq, "detail": detail}
