"""Operator-side assembly of the final L1 receipt from relayed parts (approvals.md §7).

The server never assembles (it holds no signing key). This is here so the server's tests
can play the SDK: build the L1 receipt from exactly what ``/assembly`` relays and push it,
and so the relay format is proven against the reference vectors.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from nacl.signing import SigningKey

from apps.approvals.tokens.cosign import promote_single, quorum_base, with_approvers
from apps.approvals.tokens.errors import CosignError, OperatorKeyMismatch
from apps.approvals.tokens.record import JsonInput, decode_record
from apps.receipts.verifier import (
    DOMAIN_ACTION,
    DOMAIN_APPROVAL,
    DecodeError,
    content_bytes,
    content_hash,
    verify_ed25519,
    verify_receipt,
)
from apps.receipts.verifier.schema import ENVELOPE

ALG = "heso-action/v2+ed25519"
_COSIGN_INVALID = "detached approver co-signature does not verify over the approval payload"


def assemble_l1_from_parts(
    operator_key: SigningKey,
    *,
    suspended_content: JsonInput,
    record: JsonInput,
    approver_pubkey_b64: str,
    co_sig_b64: str,
) -> dict[str, Any]:
    """The single-approver L1 receipt (§7.1), signed by ``operator_key``.

    As in the reference, neither the record's ``decision`` nor its ``approver_identity`` is
    checked here (a ``rejected`` record assembles into a Valid L1 receipt): the SDK refuses
    non-approved records before calling, and the server checks both when it accepts a leg.
    A relayed time anchor is not supported (no vector exercises it).
    """
    try:
        body = promote_single(suspended_content, record, where="assemble_l1_from_parts")
    except CosignError as error:
        raise _error("InvalidInput", error.message) from None
    operator_b64 = _check_operator(operator_key, body)
    if approver_pubkey_b64 == operator_b64:
        raise _error(
            "ApproverIsOperator", "approver public key equals the operator key (self-approval)"
        )
    canonical = content_bytes(body)
    if verify_ed25519(approver_pubkey_b64, co_sig_b64, DOMAIN_APPROVAL + canonical) is not None:
        raise _error("ApproverCosignInvalid", _COSIGN_INVALID)
    return _receipt(
        body,
        [
            _operator_entry(operator_key, operator_b64, DOMAIN_ACTION + canonical),
            _approver_entry(approver_pubkey_b64, co_sig_b64),
        ],
    )


def assemble_quorum_from_parts(
    operator_key: SigningKey,
    *,
    suspended_content: JsonInput,
    threshold: int,
    roster: Sequence[str],
    parts: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The quorum L1 receipt (§7.2) from ``parts`` shaped like the relayed ``legs``.

    Each part is ``{"record": <record JSON text>, "approver_pubkey_b64", "co_sig_b64"}``.
    Parts are checked in the given order; the result is verified before it is returned.
    """
    try:
        base = quorum_base(suspended_content, threshold, roster, where="assemble_quorum_from_parts")
    except CosignError as error:
        raise _error("InvalidInput", error.message) from None
    operator_b64 = _check_operator(operator_key, base)
    signed_roster = base["multi_approval"]["roster"]
    seen: set[str] = set()
    records: list[dict[str, Any]] = []
    entries: list[dict[str, str]] = []
    for index, part in enumerate(parts):
        record_text, key, co_sig = _part(part, index)
        if key == operator_b64:
            raise _error(
                "ApproverIsOperator", "approver public key equals the operator key (self-approval)"
            )
        if key not in signed_roster:
            raise _error(
                "ApproverNotOnRoster", f"approver key `{key}` is not on the multi-approval roster"
            )
        if key in seen:
            raise _error(
                "DuplicateApproverKey", f"duplicate approver key `{key}` in multi-approval"
            )
        seen.add(key)
        try:
            record = decode_record(record_text)
        except DecodeError as error:
            raise _error("InvalidApproverRecord", f"part {index}: {error}") from None
        payload = DOMAIN_APPROVAL + content_bytes(with_approvers(base, [record]))
        if record["approver_identity"] != key or verify_ed25519(key, co_sig, payload) is not None:
            raise _error("ApproverCosignInvalid", _COSIGN_INVALID)
        records.append(record)
        entries.append(_approver_entry(key, co_sig))
    approved = sum(1 for record in records if record["decision"] == "approved")
    if approved < threshold:
        raise _error(
            "ThresholdNotMet",
            "multi-approval threshold not met: "
            f"have {approved} distinct approvals, need {threshold}",
        )
    operator_message = DOMAIN_ACTION + content_bytes(base)
    body = with_approvers(base, sorted(records, key=lambda r: str(r["approver_identity"])))
    receipt = _receipt(
        body, [_operator_entry(operator_key, operator_b64, operator_message), *entries]
    )
    verdict = verify_receipt(receipt_text(receipt))
    if not verdict.is_valid or verdict.trust_level != "L1":
        found = verdict.kind if verdict.detail is None else f"{verdict.kind}:{verdict.detail}"
        raise _error(
            "SelfVerifyFailed", f"assembled quorum receipt failed self-verification: {found}"
        )
    return receipt


def receipt_text(receipt: Mapping[str, Any]) -> str:
    """The receipt as compact JSON with members in schema declaration order.

    This is how the reference serializes an assembled receipt, so for the vectors the text
    is byte-identical. Free-form numbers are written from the decoded value (``100.0``
    comes out as ``100``, Python float ``repr`` rather than Rust's), so a hand-crafted
    suspended body can give different *text*; the canonical bytes, hash and signatures are
    unaffected (receipts.md §16: assembled receipts are compared after decoding).
    """
    ordered = _in_declaration_order(receipt, ("obj", ENVELOPE))
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _in_declaration_order(value: Any, kind: tuple[Any, ...]) -> Any:
    if kind[0] == "obj":
        fields = kind[1]
        return {
            name: _in_declaration_order(value[name], fields[name][1])
            for name in fields
            if name in value
        }
    if kind[0] == "arr":
        return [_in_declaration_order(item, kind[1]) for item in value]
    return value  # scalars, enums and free-form values keep their own order


def _error(code: str, text: str) -> CosignError:
    return CosignError(f"[{code}] {text}", code=code)


def _check_operator(operator_key: SigningKey, body: Mapping[str, Any]) -> str:
    operator_b64 = base64.b64encode(bytes(operator_key.verify_key)).decode("ascii")
    if operator_b64 != body["agent_identity"]:
        raise OperatorKeyMismatch(
            "[OperatorKeyMismatch] operator key mismatch: suspended body bound "
            f"`{body['agent_identity']}`, signer is `{operator_b64}`",
            code="OperatorKeyMismatch",
        )
    return operator_b64


def _part(part: Mapping[str, Any], index: int) -> tuple[str, str, str]:
    try:
        values = (part["record"], part["approver_pubkey_b64"], part["co_sig_b64"])
    except (KeyError, TypeError):
        raise _error("InvalidInput", f"part {index} lacks a required member") from None
    if not all(isinstance(value, str) for value in values):
        raise _error("InvalidInput", f"part {index} has a member that is not a string")
    return values


def _operator_entry(operator_key: SigningKey, operator_b64: str, message: bytes) -> dict[str, str]:
    signature = base64.b64encode(operator_key.sign(message).signature).decode("ascii")
    return {
        "algorithm": "Ed25519",
        "key_id": "operator",
        "public_key": operator_b64,
        "signature": signature,
    }


def _approver_entry(public_key_b64: str, signature_b64: str) -> dict[str, str]:
    return {
        "algorithm": "Ed25519",
        "key_id": "approver",
        "public_key": public_key_b64,
        "signature": signature_b64,
    }


def _receipt(body: dict[str, Any], signatures: list[dict[str, str]]) -> dict[str, Any]:
    content = {**body, "action_hash": content_hash(body)}
    ordered_content = _in_declaration_order(content, ENVELOPE["content"][1])
    return {"alg": ALG, "content": ordered_content, "signatures": signatures}
