"""Server-side check of a submitted detached co-signature leg (approvals.md §8.1)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from apps.approvals.tokens.cosign import promote_single, quorum_base, with_approvers
from apps.approvals.tokens.errors import CosignError, LegRejected
from apps.approvals.tokens.record import JsonInput, decode_record
from apps.receipts.verifier import DOMAIN_APPROVAL, DecodeError, content_bytes, verify_ed25519


def verify_leg(
    *,
    suspended_content: JsonInput,
    threshold: int,
    roster: Sequence[str],
    registered_pubkeys_b64: Collection[str],
    record_text: str,
    approver_pubkey_b64: str,
    co_sig_b64: str,
    signed_keys: Collection[str] = (),
) -> dict[str, Any]:
    """The decoded record of a leg the server may store, or ``LegRejected``.

    The lane is fixed by ``threshold``: 1 means the single-approver L1 the SDK assembles
    with ``assemble_l1_from_parts`` (the §5 payload), more means a quorum leg (the §6
    payload over the stored threshold and frozen ``roster``). ``signed_keys`` are the
    approver keys that already have a stored leg on this approval.

    Checks, first failure wins (``LegRejected.code`` in brackets): the record decodes
    [``malformed_record``]; the key is a registered approver key of the org
    [``not_registered``]; for a quorum, it is on the frozen roster [``not_on_roster``]; it
    is not the agent's own key [``self_approval``]; it has no leg yet [``duplicate_leg``];
    the record names it as ``approver_identity`` [``identity_mismatch``]; the record says
    ``approved`` [``not_approved``]; the co-signature verifies [``bad_signature``].

    The identity check is mandatory for quorums (the SDK's assembler fails otherwise) and
    only recommended by the spec for a single approver, whose record the reference never
    compares with the signing key. It is required here too: a record naming someone else
    would otherwise be signed into the receipt as that person's decision.
    """
    if threshold < 1:
        raise ValueError("threshold must be >= 1")
    try:
        record = decode_record(record_text)
    except DecodeError as error:
        raise LegRejected(
            "malformed_record", f"the record is not an ApproverRecord: {error}"
        ) from None
    if approver_pubkey_b64 not in registered_pubkeys_b64:
        raise LegRejected("not_registered", "the key is not a registered approver key")
    if threshold > 1 and approver_pubkey_b64 not in roster:
        raise LegRejected("not_on_roster", "the key is not on the approval's frozen roster")
    try:
        if threshold == 1:
            body = promote_single(suspended_content, record, where="verify_leg")
        else:
            base = quorum_base(suspended_content, threshold, roster, where="verify_leg")
            body = with_approvers(base, [record])
    except CosignError as error:
        raise LegRejected("suspended_content_invalid", error.message) from None
    if approver_pubkey_b64 == body["agent_identity"]:
        raise LegRejected("self_approval", "the approver key is the agent's own key")
    if approver_pubkey_b64 in signed_keys:
        raise LegRejected("duplicate_leg", "this key has already co-signed this approval")
    if record["approver_identity"] != approver_pubkey_b64:
        raise LegRejected(
            "identity_mismatch", "the record's approver_identity is not the signing key"
        )
    if record["decision"] != "approved":
        raise LegRejected("not_approved", "only an approved record can be a co-signature leg")
    if (
        verify_ed25519(approver_pubkey_b64, co_sig_b64, DOMAIN_APPROVAL + content_bytes(body))
        is not None
    ):
        raise LegRejected(
            "bad_signature", "the co-signature does not verify over the approval payload"
        )
    return record
