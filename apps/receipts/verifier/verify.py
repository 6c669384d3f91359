"""``verify_receipt``: the check order of receipts.md §8, with the server rules of server.md §1.

Decode → kind dispatch → alg → version → hash → roles → signatures → trust level →
redaction → time anchor → anchor policy → mandate → Valid. The first failure wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from blake3 import blake3

from apps.common.vocabulary import DECISION_KINDS
from apps.receipts.verifier.canonical import canonicalize
from apps.receipts.verifier.receipt_text import DecodeError, JsonValue, parse_json
from apps.receipts.verifier.schema import decode_envelope
from apps.receipts.verifier.signatures import (
    DOMAIN_ACTION,
    DOMAIN_APPROVAL,
    DOMAIN_DECISION,
    DOMAIN_SUSPEND,
    canonical_b64decode,
    verify_ed25519,
)

ALG_V2 = "heso-action/v2+ed25519"
VERSION_V2 = "heso-action/2.0"
VERSION_V1 = "heso-action/1.0"
REDACTION_ALGORITHM = "salted-blake3/v1"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DECISION_KINDS = frozenset(DECISION_KINDS)


@dataclass(frozen=True)
class DecodedReceipt:
    """A receipt that decoded: its normalized envelope and what the server needs of it.

    What is read of it is computed once (``cached_property``): the append reads the same
    members several times per receipt, a hundred receipts a batch."""

    envelope: dict[str, Any]
    canonical_bytes: bytes  # C: JCS of the content without action_hash (receipts.md §4)
    fast_path_safe: bool = False  # see canonical.py; recorded by the decoder

    @cached_property
    def content(self) -> dict[str, Any]:
        content: dict[str, Any] = self.envelope["content"]
        return content

    @cached_property
    def action_hash(self) -> str:
        value: str = self.content["action_hash"]
        return value

    @cached_property
    def kind(self) -> str:
        value: str = self.content.get("kind", "action")
        return value

    @cached_property
    def session_id(self) -> str | None:
        return self.content.get("session_id")

    @cached_property
    def seq(self) -> int | None:
        return self.content.get("seq")

    @cached_property
    def prev_receipt_hash(self) -> str | None:
        return self.content.get("prev_receipt_hash")

    @cached_property
    def operator_public_key(self) -> str | None:
        for entry in self.envelope["signatures"]:
            if entry["key_id"] == "operator":
                key: str = entry["public_key"]
                return key
        return None

    @cached_property
    def envelope_canonical(self) -> bytes:
        return canonicalize(self.envelope, fast_path_safe=self.fast_path_safe)

    @cached_property
    def stored_text(self) -> str:
        """What the mirror stores: the normalized envelope as JCS text."""
        return self.envelope_canonical.decode("utf-8")


@dataclass(frozen=True)
class Verdict:
    """The outcome of verification.

    For a lifecycle kind (receipts.md §12) ``trust_level`` is the level derived offline,
    always ``L0`` (server.md §1): the claim is never echoed, never refused either, and is
    reported as ``claimed_trust_level`` where it differs. ``decision_signer`` is the public
    key the kind-bound check found for a kind that needs decision authority; the mirror
    derives ``L1`` from it when it is an approver key registered for the org.
    """

    kind: str
    trust_level: str | None = None
    detail: str | None = None
    stage: Literal["decode", "verify"] = "verify"
    receipt: DecodedReceipt | None = None
    claimed_trust_level: str | None = None
    decision_signer: str | None = None

    @property
    def is_valid(self) -> bool:
        return self.kind == "Valid"

    def as_dict(self) -> dict[str, str]:
        shown = {"kind": self.kind}
        if self.trust_level is not None:
            shown["trust_level"] = self.trust_level
        if self.claimed_trust_level is not None:
            shown["claimed_trust_level"] = self.claimed_trust_level
        if self.detail is not None:
            shown["detail"] = self.detail
        shown["time_status"] = "NoTrustedTime"
        return shown


class _Refusal(Exception):
    def __init__(self, kind: str, detail: str | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


def content_bytes(
    content: dict[str, Any],
    *,
    without: tuple[str, ...] = ("action_hash",),
    fast_path_safe: bool | None = None,
) -> bytes:
    trimmed = {key: value for key, value in content.items() if key not in without}
    return canonicalize(trimmed, fast_path_safe=fast_path_safe)


def content_hash(content: dict[str, Any]) -> str:
    """Lowercase hex BLAKE3 of C (receipts.md §5)."""
    return blake3(content_bytes(content)).hexdigest()


def verify_receipt(raw: bytes | str) -> Verdict:
    """Parse and verify one receipt given as JSON text."""
    try:
        value = parse_json(raw)
    except DecodeError as error:
        return _malformed_input(error)
    return verify_receipt_value(value)


def verify_receipt_value(value: JsonValue) -> Verdict:
    """Verify an already-parsed receipt (e.g. the ``receipt`` member of a push body)."""
    try:
        envelope, fast_path_safe = decode_envelope(value)
    except DecodeError as error:
        return _malformed_input(error)
    receipt = DecodedReceipt(
        envelope=envelope,
        canonical_bytes=content_bytes(envelope["content"], fast_path_safe=fast_path_safe),
        fast_path_safe=fast_path_safe,
    )
    try:
        trust_level, decision_signer = _verify_decoded(receipt)
    except _Refusal as refusal:
        return Verdict(kind=refusal.kind, detail=refusal.detail, receipt=receipt)
    claimed = receipt.content["trust_level"]
    return Verdict(
        kind="Valid",
        trust_level=trust_level,
        receipt=receipt,
        claimed_trust_level=claimed if claimed != trust_level else None,
        decision_signer=decision_signer,
    )


def _malformed_input(error: DecodeError) -> Verdict:
    return Verdict(
        kind="Malformed",
        detail=f"input is not a well-formed action receipt: {error}",
        stage="decode",
    )


def _verify_decoded(receipt: DecodedReceipt) -> tuple[str, str | None]:
    """The derived trust level, and the decision signer of a lifecycle kind needing one."""
    content = receipt.content
    envelope = receipt.envelope
    if envelope["alg"] != ALG_V2:
        raise _Refusal("WrongAlgorithm", envelope["alg"])
    version = content["action_version"]
    if version != VERSION_V2:
        detail = f"action_version `{version}` (this verifier supports `{VERSION_V2}`)"
        if version == VERSION_V1:
            detail += " (a retired v1 receipt — re-verify it with a v1 verifier)"
        raise _Refusal("Unsupported", detail)
    if receipt.kind != "action":
        return "L0", _verify_lifecycle(receipt)
    if blake3(receipt.canonical_bytes).hexdigest() != receipt.action_hash:
        raise _Refusal("HashMismatch")
    signatures = envelope["signatures"]
    for entry in signatures:
        if entry["key_id"] not in ("operator", "approver"):
            raise _Refusal("Malformed", f"unknown signature role `{entry['key_id']}`")
    derived = _verify_quorum(receipt) if "multi_approval" in content else _verify_single(receipt)
    if content["trust_level"] != derived:
        raise _Refusal("TrustLevelMismatch", f"embedded={content['trust_level']} derived={derived}")
    _check_redaction(content)
    _check_time_anchor(content)
    if content.get("anchor_policy") == "required" and "time_anchor" not in content:
        raise _Refusal("AnchorRequired")
    _check_mandate(content)
    return derived, None


def _one_operator(signatures: list[dict[str, Any]]) -> dict[str, Any]:
    operators = [entry for entry in signatures if entry["key_id"] == "operator"]
    if len(operators) > 1:
        raise _Refusal("Malformed", "more than one `operator` signature entry")
    if not operators:
        raise _Refusal("Malformed", "no `operator` signature entry")
    return operators[0]


def _check_signature(entry: dict[str, Any], message: bytes) -> None:
    if entry["algorithm"] != "Ed25519":
        raise _Refusal(
            "InvalidSignature",
            f"unsupported signature algorithm `{entry['algorithm']}` — expected Ed25519",
        )
    problem = verify_ed25519(entry["public_key"], entry["signature"], message)
    if problem is not None:
        raise _Refusal("InvalidSignature", problem)


def _verify_single(receipt: DecodedReceipt) -> str:
    signatures = receipt.envelope["signatures"]
    operator = _one_operator(signatures)
    approvers = [entry for entry in signatures if entry["key_id"] == "approver"]
    if len(approvers) > 1:
        raise _Refusal("Malformed", "more than one `approver` signature entry")
    _check_signature(operator, DOMAIN_ACTION + receipt.canonical_bytes)
    if not approvers:
        return "L0"
    approver = approvers[0]
    _check_signature(approver, DOMAIN_APPROVAL + receipt.canonical_bytes)
    if approver["public_key"] == operator["public_key"]:
        raise _Refusal("SelfApproval")
    return "L1"


def _with_approvers(
    content: dict[str, Any], approvers: list[dict[str, Any]], fast_path_safe: bool
) -> bytes:
    variant = dict(content)
    variant["multi_approval"] = {**content["multi_approval"], "approvers": approvers}
    return content_bytes(variant, fast_path_safe=fast_path_safe)


def _verify_quorum(receipt: DecodedReceipt) -> str:
    content = receipt.content
    quorum = content["multi_approval"]
    if "approver_decision" in content:
        raise _Refusal("Malformed", "receipt carries both `approver_decision` and `multi_approval`")
    if quorum["threshold"] < 1:
        raise _Refusal("Malformed", "multi_approval threshold must be >= 1")
    if not quorum["roster"]:
        raise _Refusal("Malformed", "multi_approval roster must be non-empty")
    signatures = receipt.envelope["signatures"]
    operator = _one_operator(signatures)
    _check_signature(operator, DOMAIN_ACTION + _with_approvers(content, [], receipt.fast_path_safe))
    entries = [entry for entry in signatures if entry["key_id"] == "approver"]
    records = quorum["approvers"]
    if len(entries) != len(records):
        raise _Refusal(
            "Malformed",
            f"multi_approval has {len(records)} record(s) but {len(entries)} approver "
            "signature entr(ies)",
        )
    seen: set[str] = set()
    verified = 0
    for entry in entries:
        key = entry["public_key"]
        record = next((r for r in records if r["approver_identity"] == key), None)
        if record is None:
            raise _Refusal(
                "Malformed", f"approver signature key `{key}` has no matching multi_approval record"
            )
        if key in seen:
            raise _Refusal("Malformed", f"duplicate approver key `{key}` in multi_approval")
        seen.add(key)
        if key == operator["public_key"]:
            raise _Refusal("SelfApproval")
        if key not in quorum["roster"]:
            raise _Refusal("Malformed", f"approver key `{key}` is not on the signed roster")
        if record["decision"] != "approved":
            raise _Refusal("Malformed", f"multi_approval record for key `{key}` is not `approved`")
        _check_signature(
            entry, DOMAIN_APPROVAL + _with_approvers(content, [record], receipt.fast_path_safe)
        )
        verified += 1
    if verified < quorum["threshold"]:
        raise _Refusal("ThresholdNotMet", f"have={verified} need={quorum['threshold']}")
    return "L1"


def _check_redaction(content: dict[str, Any]) -> None:
    redaction = content.get("redaction")
    if redaction is None:
        return
    for marker in redaction["markers"]:
        path = marker["field_path"]
        if redaction["mode"] == "commit_and_reveal":
            if marker["algorithm"] != REDACTION_ALGORITHM:
                raise _Refusal(
                    "MalformedRedaction",
                    f"redaction marker `{path}` uses algorithm `{marker['algorithm']}` "
                    f"(expected `{REDACTION_ALGORITHM}`)",
                )
            if not _HEX64.fullmatch(marker["commitment"]):
                raise _Refusal(
                    "MalformedRedaction",
                    f"redaction marker `{path}` commitment is not 64 lowercase-hex",
                )
        elif marker["algorithm"] == REDACTION_ALGORITHM or marker["commitment"] != "":
            raise _Refusal(
                "MalformedRedaction",
                f"destructive redaction marker `{path}` must carry no commitment",
            )


def _check_time_anchor(content: dict[str, Any]) -> None:
    """receipts.md §11 steps 1-5; without RFC 3161 support a present anchor fails closed."""
    anchor = content.get("time_anchor")
    if anchor is None:
        return
    fail = "TimeAnchorUnverifiable"
    if anchor["kind"] != "rfc3161":
        raise _Refusal(
            fail, f"time_anchor kind `{anchor['kind']}` is not supported (expected `rfc3161`)"
        )
    anchored = anchor["anchored_hash"]
    if not _HEX64.fullmatch(anchored):
        raise _Refusal(fail, "time_anchor anchored_hash is not 64 lowercase-hex")
    pre_anchor = blake3(content_bytes(content, without=("action_hash", "time_anchor"))).hexdigest()
    if anchored != pre_anchor:
        raise _Refusal(
            fail, f"time_anchor anchored_hash {anchored} does not match action_hash {pre_anchor}"
        )
    token = canonical_b64decode(anchor["token_b64"])
    if token is None:
        raise _Refusal(fail, "time_anchor token_b64 is not valid base64")
    if not token:
        raise _Refusal(fail, "time_anchor token_b64 decoded to empty")
    raise _Refusal(
        fail, "time_anchor RFC 3161 token not verified: this service does not verify TSA tokens"
    )


def _check_mandate(content: dict[str, Any]) -> None:
    action = content["action"]
    mandate = action.get("mandate")
    if action["verb"] != "payment" or mandate is None:
        return
    if mandate["verdict"] == "invalid":
        raise _Refusal(
            "MandateRejected",
            "payment receipt carries a mandate binding with an INVALID verdict "
            f"(mandate_id `{mandate['mandate_id']}`); the payment lacked a verified user "
            "authorization",
        )
    if mandate["verdict"] == "absent":
        raise _Refusal(
            "MandateRejected",
            "payment receipt carries a mandate binding marked ABSENT; the payment lacked a "
            "user authorization",
        )


def _lifecycle_domain(content: dict[str, Any]) -> tuple[bytes, bool]:
    """The signing domain of a lifecycle kind, and whether it needs decision authority."""
    kind = content["kind"]
    if kind == "suspended":
        return DOMAIN_SUSPEND, False
    if kind in _DECISION_KINDS:
        return DOMAIN_DECISION, True
    if kind == "key_rotation" and content.get("key_rotation", {}).get("role") == "decision":
        return DOMAIN_DECISION, True
    return DOMAIN_ACTION, False  # completed, producer key_rotation


def _verify_lifecycle(receipt: DecodedReceipt) -> str | None:
    """receipts.md §12 kind-bound check. Returns the decision signer's public key for a kind
    that needs decision authority (None otherwise); the claimed level is not checked
    (server.md §1: derived, never echoed, never refused)."""
    content = receipt.content
    if blake3(receipt.canonical_bytes).hexdigest() != receipt.action_hash:
        raise _Refusal("HashMismatch")
    domain, needs_decision = _lifecycle_domain(content)
    label = "".join(part.title() for part in content["kind"].split("_"))
    signatures = receipt.envelope["signatures"]
    signer = next((e for e in signatures if _verifies(e, domain + receipt.canonical_bytes)), None)
    action_message = DOMAIN_ACTION + receipt.canonical_bytes
    if signer is None:
        if needs_decision and any(_verifies(e, action_message) for e in signatures):
            raise _Refusal(
                "Malformed",
                f"{label} is decision-signed, but only a producer (operator) signature is "
                "present — a customer cannot approve their own pause",
            )
        raise _Refusal(
            "Malformed", f"no signature verifies under the {label} kind's required domain"
        )
    if needs_decision and any(
        e["public_key"] == signer["public_key"] and _verifies(e, action_message) for e in signatures
    ):
        raise _Refusal(
            "Malformed",
            f"{label} decision is signed by the same key that produced an action "
            "authorization on this receipt — no self-approval",
        )
    if not needs_decision:
        return None
    key: str = signer["public_key"]
    return key


def _verifies(entry: dict[str, Any], message: bytes) -> bool:
    return (
        entry["algorithm"] == "Ed25519"
        and verify_ed25519(entry["public_key"], entry["signature"], message) is None
    )
