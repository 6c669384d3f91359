"""Receipt intake: the SDK's push as one use case, for both profiles and the console's demo.

verify (decode and re-verify, server.md §1-2, with the trust level the mirror derives from
the org's registered approver keys) → count a refusal (the mirror's refusal counter) →
append to the org's chain → open the approval a suspended receipt waits for.

Single pushes raise their refusal; a batch returns one typed outcome per position. The use
case sits with approvals because the trust level reads approver keys and a suspended
receipt opens an approval; the mirror below knows nothing of either. The HTTP layer
(``apps.api``) only parses bodies and shapes answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import NoReturn, get_args

from django.db import transaction

from apps.approvals.content import is_suspended
from apps.approvals.services.keys import mirror_trust_level
from apps.approvals.services.lifecycle import ANSWERING_KINDS, approval_answer_link
from apps.approvals.services.opening import approval_open_for_suspended
from apps.common.errors import InvalidInput
from apps.receipts.errors import (
    ChainConstraint,
    QuotaExceeded,
    ReceiptMalformed,
    ReceiptRejected,
)
from apps.receipts.services import (
    AppendOutcome,
    BatchItem,
    receipt_append,
    receipt_append_batch,
    refusals_record,
)
from apps.receipts.verifier import JsonValue, object_members, verify_receipt_value
from apps.tenancy.models import ApiKey, Org

# What can refuse one receipt (as opposed to the request that carries it): the type, and
# the classes to catch (``except`` takes a tuple, not a union).
ReceiptRefusal = InvalidInput | ReceiptMalformed | ReceiptRejected | ChainConstraint | QuotaExceeded
RECEIPT_REFUSALS: tuple[type[ReceiptRefusal], ...] = get_args(ReceiptRefusal)
# Those decided by verification alone, before anything is appended.
VERIFY_REFUSALS = (InvalidInput, ReceiptMalformed, ReceiptRejected)
IntakeOutcome = AppendOutcome | ReceiptRefusal


@dataclass(frozen=True)
class VerifiedReceipt(BatchItem):
    """A verified receipt as intake hands it on: what the mirror appends, and the key whose
    signature gives a decision link its authority (server.md §1), if any."""

    decision_signer: str | None = None


def claimed_action_hash(receipt: JsonValue) -> str:
    """The ``content.action_hash`` a receipt claims, or "" when it has none to read (how a
    refusal names its receipt; for a verified receipt it is its action hash)."""
    members = object_members(receipt)
    content = dict(members).get("content") if members is not None else None
    content_members = object_members(content) if content is not None else None
    claimed = dict(content_members).get("action_hash") if content_members is not None else None
    return claimed if isinstance(claimed, str) else ""


def receipt_verify(receipt: JsonValue, *, org: Org, count_refusal: bool = True) -> VerifiedReceipt:
    """The receipt verified, with the trust level the mirror stores for it in ``org``; or
    its refusal: ``InvalidInput`` when it is not an object with a ``content`` object,
    ``ReceiptMalformed`` when it does not decode, ``ReceiptRejected`` for any other verdict
    that is not valid (server.md §2). A pushed receipt's verdict refusal is counted (the
    mirror's refusal counter); ``count_refusal`` False for one that is not a push."""
    members = object_members(receipt)
    if members is None:
        raise InvalidInput("the receipt must be a JSON object")
    content = dict(members).get("content")
    if content is None or object_members(content) is None:
        raise InvalidInput("content: must be present and a JSON object")
    verdict = verify_receipt_value(receipt)
    if verdict.stage == "decode":
        _refuse(ReceiptMalformed(f"Malformed: {verdict.detail}"), org, counted=count_refusal)
    if not verdict.is_valid or verdict.receipt is None or verdict.trust_level is None:
        named = verdict.receipt.action_hash if verdict.receipt is not None else ""
        refusal = ReceiptRejected(verdict.kind, verdict.detail, action_hash=named)
        _refuse(refusal, org, counted=count_refusal)
    return VerifiedReceipt(
        receipt=verdict.receipt,
        trust_level=mirror_trust_level(org=org, verdict=verdict),
        decision_signer=verdict.decision_signer,
    )


def _refuse(refusal: ReceiptMalformed | ReceiptRejected, org: Org, *, counted: bool) -> NoReturn:
    """Raise a verdict refusal, counted first when it was a push's."""
    if counted:
        refusals_record(org=org, refusals=[_counted(refusal)])
    raise refusal


def _counted(refusal: ReceiptMalformed | ReceiptRejected) -> tuple[str, str]:
    """What the refusal counter records of a verdict refusal: its kind, and the action
    hash the receipt names where it decoded that far."""
    if isinstance(refusal, ReceiptRejected):
        return refusal.kind, refusal.action_hash
    return "Malformed", ""


def receipt_intake(
    *,
    org: Org,
    receipt: JsonValue,
    api_key: ApiKey | None = None,
    supersedes_action_hash: str | None = None,
    open_approval: bool = True,
) -> AppendOutcome:
    """One pushed receipt, verified and appended (or found already mirrored); a suspended
    one opens its approval in the same transaction when ``open_approval`` (the key-scoped
    push; team-path opens explicitly). Raises a :data:`ReceiptRefusal` (or a supersede
    refusal)."""
    item = receipt_verify(receipt, org=org)
    content = item.receipt.content
    opens = open_approval and is_suspended(content)
    if not (opens or _answers_a_suspension(item)):
        return _append(org, item, api_key, supersedes_action_hash)
    with transaction.atomic():
        outcome = _append(org, item, api_key, supersedes_action_hash)
        if outcome.appended and opens:
            operator = item.receipt.operator_public_key
            approval_open_for_suspended(
                org=org, content=content, operator_keys=[operator] if operator else []
            )
        elif outcome.appended:
            _answer(org, item)
    return outcome


def _answers_a_suspension(item: VerifiedReceipt) -> bool:
    """A lifecycle link that may answer a suspension: a decision, an escalation, a
    completion, in a session (see ``apps.approvals.services.lifecycle``)."""
    return item.receipt.kind in ANSWERING_KINDS and bool(item.receipt.session_id)


def _answer(org: Org, item: VerifiedReceipt) -> None:
    approval_answer_link(
        org=org, content=item.receipt.content, trust_level=item.trust_level,
        decision_signer=item.decision_signer,
    )  # fmt: skip


def receipt_intake_batch(
    *, org: Org, receipts: Sequence[JsonValue], api_key: ApiKey | None = None
) -> list[IntakeOutcome]:
    """Several receipts, one outcome per position in the order given: each is verified on
    its own (a bad one never blocks the others), the valid ones appended in order under one
    lock (contiguous ``seq``); a chain or quota refusal takes its receipt's place."""
    checked: list[VerifiedReceipt | ReceiptRefusal] = []
    counted: list[tuple[str, str]] = []  # the verdict refusals, counted together
    for receipt in receipts:
        try:
            checked.append(receipt_verify(receipt, org=org, count_refusal=False))
        except VERIFY_REFUSALS as refusal:
            checked.append(refusal)
            if not isinstance(refusal, InvalidInput):  # not a receipt: nothing to count
                counted.append(_counted(refusal))
    refusals_record(org=org, refusals=counted)
    items = [item for item in checked if isinstance(item, VerifiedReceipt)]
    answering = {id(item) for item in items if _answers_a_suspension(item)}
    # A link answering a suspension changes its approval in the transaction that appends
    # it; a batch without one keeps the append's own (pipelined) transaction.
    with transaction.atomic() if answering else nullcontext():
        results = receipt_append_batch(org=org, items=items, api_key=api_key)
        for item, result in zip(items, results, strict=True):
            if isinstance(result, AppendOutcome) and result.appended and id(item) in answering:
                _answer(org, item)
    appended = iter(results)
    return [next(appended) if isinstance(item, BatchItem) else item for item in checked]


def _append(
    org: Org, item: BatchItem, api_key: ApiKey | None, supersedes_action_hash: str | None
) -> AppendOutcome:
    return receipt_append(
        org=org,
        receipt=item.receipt,
        trust_level=item.trust_level,
        supersedes_action_hash=supersedes_action_hash,
        api_key=api_key,
    )
