"""The offline verdict on a receipt's proof object (transparency.md §5.1, §7).

The verifier's inputs (action hash, origin, trusted witness keys, quorum, expected org)
come from its own configuration; nothing in the proof is trusted. The first failing step
gives the verdict's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.transparency.tree.merkle import MAX_PROOF_HASHES, leaf_hash, verify_inclusion
from apps.transparency.tree.note import (
    MAX_U64,
    ORG_ID_RE,
    NoteError,
    WitnessKey,
    cosignature_verifies,
    is_hex64,
    org_head_leaf,
    parse_checkpoint,
    parse_cosignature_line,
    parse_vkey,
)

REQUIRED_MEMBERS = frozenset(
    {
        "log_id",
        "leaf_index",
        "inclusion_proof",
        "org_root",
        "org_tree_size",
        "epoch",
        "org_id",
        "top_leaf_index",
        "checkpoint",
    }
)
OPTIONAL_MEMBERS = frozenset({"top_inclusion_proof", "cosignatures"})

REASONS = (
    "bad_input",
    "malformed",
    "bad_checkpoint",
    "wrong_log",
    "bad_cosignature",
    "insufficient_cosignatures",
    "wrong_org",
    "org_inclusion_failed",
    "top_inclusion_failed",
)


@dataclass(frozen=True)
class ProofVerdict:
    valid: bool
    reason: str | None = None
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        if self.valid:
            return {"valid": True}
        return {"valid": False, "reason": self.reason, "detail": self.detail or ""}


class _Fail(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _u64(value: object, *, minimum: int = 0) -> bool:
    return _is_int(value) and minimum <= value <= MAX_U64  # type: ignore[operator]


def _hash_list(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= MAX_PROOF_HASHES
        and all(is_hex64(item) for item in value)
    )


def _check_inputs(
    action_hash: object, origin: object, witness_keys: object, required: object, org_id: object
) -> list[WitnessKey]:
    if not is_hex64(action_hash):
        raise _Fail("bad_input", "action_hash is not hex64")
    if not isinstance(origin, str) or not origin:
        raise _Fail("bad_input", "origin is not a non-empty string")
    if not isinstance(witness_keys, list):
        raise _Fail("bad_input", "witness_keys is not an array of vkeys")
    keys: list[WitnessKey] = []
    for vkey in witness_keys:
        try:
            keys.append(parse_vkey(vkey))
        except NoteError as error:
            raise _Fail("bad_input", f"witness key {vkey!r}: {error}") from error
    if not _is_int(required) or required < 0:  # type: ignore[operator]
        raise _Fail("bad_input", "required_cosignatures is not an integer >= 0")
    if org_id is not None and not isinstance(org_id, str):
        raise _Fail("bad_input", "org_id is not a string")
    return keys


def _check_shape(proof: object) -> dict[str, Any]:
    if not isinstance(proof, dict):
        raise _Fail("malformed", "the proof is not an object")
    names = set(proof)
    missing = REQUIRED_MEMBERS - names
    if missing:
        raise _Fail("malformed", f"missing member(s): {', '.join(sorted(missing))}")
    unknown = names - REQUIRED_MEMBERS - OPTIONAL_MEMBERS
    if unknown:
        raise _Fail("malformed", f"unknown member(s): {', '.join(sorted(unknown))}")
    for name in ("leaf_index", "top_leaf_index"):
        if not _u64(proof[name]):
            raise _Fail("malformed", f"{name} is not an integer in u64")
    for name in ("org_tree_size", "epoch"):
        if not _u64(proof[name], minimum=1):
            raise _Fail("malformed", f"{name} is not an integer >= 1 in u64")
    if not _hash_list(proof["inclusion_proof"]):
        raise _Fail("malformed", "inclusion_proof is not an array of at most 64 hex64")
    if "top_inclusion_proof" in proof and (
        not _hash_list(proof["top_inclusion_proof"]) or not proof["top_inclusion_proof"]
    ):
        raise _Fail("malformed", "top_inclusion_proof is not a non-empty array of hex64")
    if not is_hex64(proof["org_root"]):
        raise _Fail("malformed", "org_root is not hex64")
    if not isinstance(proof["org_id"], str) or not ORG_ID_RE.match(proof["org_id"]):
        raise _Fail("malformed", "org_id is not olog_ and 26 base32 characters")
    for name in ("log_id", "checkpoint"):
        if not isinstance(proof[name], str):
            raise _Fail("malformed", f"{name} is not a string")
    if "cosignatures" in proof:
        cosignatures = proof["cosignatures"]
        if not isinstance(cosignatures, list) or not cosignatures:
            raise _Fail("malformed", "cosignatures is not a non-empty array")
        for item in cosignatures:
            if (
                not isinstance(item, dict)
                or set(item) != {"witness_key", "signature"}
                or not all(isinstance(value, str) for value in item.values())
            ):
                raise _Fail("malformed", "a cosignature is not {witness_key, signature}")
    return proof


def _verify(
    action_hash: object,
    proof: object,
    origin: object,
    witness_keys: object,
    required: object,
    org_id: object,
) -> None:
    keys = _check_inputs(action_hash, origin, witness_keys, required, org_id)
    checked = _check_shape(proof)
    try:
        checkpoint = parse_checkpoint(checked["checkpoint"])
    except NoteError as error:
        raise _Fail("bad_checkpoint", str(error)) from error
    if checked["log_id"] != origin or checkpoint.origin != origin:
        raise _Fail("wrong_log", "log_id or the checkpoint's origin is not the trusted origin")
    vouching: set[bytes] = set()
    for line in checkpoint.lines:
        for key in keys:
            if line.name != key.name or line.signature[:4] != key.key_id:
                continue
            try:
                cosignature = parse_cosignature_line(line.text)
            except NoteError as error:
                raise _Fail("bad_cosignature", f"{key.name}: {error}") from error
            if not cosignature_verifies(key, cosignature, checkpoint.body):
                raise _Fail("bad_cosignature", f"{key.name}: the cosignature does not verify")
            vouching.add(key.name.encode() + b"+" + key.key_id + key.public_key)
    if len(vouching) < required:  # type: ignore[operator]
        raise _Fail(
            "insufficient_cosignatures",
            f"{len(vouching)} trusted cosignature(s), {required} required",
        )
    if org_id is not None and checked["org_id"] != org_id:
        raise _Fail("wrong_org", "the proof is for another org")
    action = bytes.fromhex(action_hash)  # type: ignore[arg-type]
    org_root = bytes.fromhex(checked["org_root"])
    if not verify_inclusion(
        leaf_hash(action),
        checked["leaf_index"],
        checked["org_tree_size"],
        [bytes.fromhex(item) for item in checked["inclusion_proof"]],
        org_root,
    ):
        raise _Fail("org_inclusion_failed", "the receipt is not in the org tree at that size")
    head = org_head_leaf(checked["org_id"], checked["org_tree_size"], org_root)
    if not verify_inclusion(
        leaf_hash(head),
        checked["top_leaf_index"],
        checkpoint.size,
        [bytes.fromhex(item) for item in checked.get("top_inclusion_proof", [])],
        checkpoint.root,
    ):
        raise _Fail("top_inclusion_failed", "the org head is not in the checkpoint's tree")


def verify_proof(
    *,
    action_hash: object,
    proof: object,
    origin: object,
    witness_keys: object,
    required_cosignatures: object,
    org_id: object = None,
) -> ProofVerdict:
    """§7: whether ``proof`` shows the receipt of ``action_hash`` is in the log."""
    try:
        _verify(action_hash, proof, origin, witness_keys, required_cosignatures, org_id)
    except _Fail as failure:
        return ProofVerdict(valid=False, reason=failure.reason, detail=failure.detail)
    return ProofVerdict(valid=True)
