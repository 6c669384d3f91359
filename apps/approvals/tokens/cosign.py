"""The bytes a human approver co-signs: approvals.md §5 (single) and §6 (quorum leg).

Both promote the suspended L0 body ``S`` (the pushed suspended receipt's ``content``) to the
L1 body the final receipt will carry, then sign ``heso-approval/v1\\0 || C(body)``. The
operator signs ``heso-action/v1\\0`` over the same ``C`` (single) or over the quorum base
with no approvers (quorum), so the approver signature fits the receipt the SDK assembles.

``S`` is decoded with the receipt verifier's strict content decoder: the server only holds
suspended bodies that already passed it when they were mirrored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.approvals.tokens.errors import CosignError
from apps.approvals.tokens.record import JsonInput, as_json_value, decode_record
from apps.receipts.verifier import (
    DOMAIN_APPROVAL,
    DecodeError,
    content_bytes,
    decode_content,
)

_U32_MAX = 2**32 - 1
_ANCHORED = "suspended body carries a time_anchor; the async-L1 path promotes a pre-anchor L0 body"
_DECIDED = "suspended body is already decided or not L0"


def l1_cosign_payload(suspended_content: JsonInput, record: JsonInput) -> bytes:
    """``heso-approval/v1\\0 || C(B)``, B = S with ``approver_decision`` = record, level L1."""
    return DOMAIN_APPROVAL + content_bytes(
        promote_single(suspended_content, record, where="l1_cosign_payload")
    )


def quorum_cosign_payload(
    suspended_content: JsonInput, threshold: int, roster: Sequence[str], record: JsonInput
) -> bytes:
    """``heso-approval/v1\\0 || C(Q with approvers = [record])`` (approvals.md §6)."""
    base = quorum_base(suspended_content, threshold, roster, where="quorum_cosign_payload")
    decoded = _record(record, where="quorum_cosign_payload")
    return DOMAIN_APPROVAL + content_bytes(with_approvers(base, [decoded]))


def promote_single(
    suspended_content: JsonInput, record: JsonInput, *, where: str
) -> dict[str, Any]:
    """B of §5 (still carrying S's ``action_hash``, which ``C`` leaves out)."""
    content = _suspended(suspended_content, where=where)
    if "approver_decision" in content or content["trust_level"] != "L0":
        raise CosignError(f"{where}: {_DECIDED}")
    return {**content, "approver_decision": _record(record, where=where), "trust_level": "L1"}


def quorum_base(
    suspended_content: JsonInput, threshold: int, roster: Sequence[str], *, where: str
) -> dict[str, Any]:
    """Q of §6: S with ``multi_approval`` = {threshold, sorted roster, no approvers}, level L1."""
    content = _suspended(suspended_content, where=where)
    if (
        "approver_decision" in content
        or "multi_approval" in content
        or content["trust_level"] != "L0"
    ):
        raise CosignError(f"{where}: {_DECIDED}")
    if threshold < 1:
        raise CosignError(f"{where}: multi-approval threshold must be >= 1")
    if threshold > _U32_MAX:
        raise CosignError(f"{where}: multi-approval threshold is out of range")
    if not roster:
        raise CosignError(f"{where}: multi-approval roster must be non-empty")
    quorum = {"threshold": threshold, "roster": sorted(roster), "approvers": []}
    return {**content, "multi_approval": quorum, "trust_level": "L1"}


def with_approvers(base: dict[str, Any], approvers: list[dict[str, Any]]) -> dict[str, Any]:
    """``base`` (a §6 Q) with its ``multi_approval.approvers`` replaced."""
    return {**base, "multi_approval": {**base["multi_approval"], "approvers": approvers}}


def _suspended(suspended_content: JsonInput, *, where: str) -> dict[str, Any]:
    try:
        content = decode_content(as_json_value(suspended_content))
    except DecodeError as error:
        raise CosignError(f"{where}: suspended body is not a valid content: {error}") from None
    if "time_anchor" in content:
        raise CosignError(f"{where}: {_ANCHORED}")
    return content


def _record(record: JsonInput, *, where: str) -> dict[str, Any]:
    try:
        return decode_record(record)
    except DecodeError as error:
        raise CosignError(f"{where}: approver record is not valid: {error}") from None
