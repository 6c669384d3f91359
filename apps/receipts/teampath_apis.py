"""Team-path receipt routes: ``POST /v1/receipts`` and ``POST /v1/receipts/batch``.

The body of a single push is the signed receipt itself; a batch is ``{"receipts": [...]}``.
Both answer ``OutboxPushResult {receiptId, accepted, rejectionReason?}`` (the batch: a JSON
array of them, in the order sent), where ``receiptId`` is the receipt's ``action_hash``.
Verification runs before any transaction; the appends go through the same per-org chain
as the key-scoped profile (``receipt_append`` / ``receipt_append_batch``). Status codes
and error codes: docs/teampath-errors.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analytics.services import refusal_record
from apps.common.errors import DomainError, InvalidInput, InvalidJson
from apps.common.json_body import read_json_bytes
from apps.common.openapi import (
    json_body,
    list_of,
    ok,
    receipt_refusal,
    teampath_error,
    teampath_errors,
)
from apps.common.teampath import TeamPathApi, domain_error_response
from apps.receipts.apis import verified_receipt
from apps.receipts.errors import (
    ChainConstraint,
    QuotaExceeded,
    ReceiptMalformed,
    ReceiptRejected,
)
from apps.receipts.services import (
    AppendOutcome,
    BatchItem,
    BatchResult,
    receipt_append,
    receipt_append_batch,
)
from apps.receipts.verifier import DecodeError, JsonValue, object_members, parse_json
from apps.tenancy.models import Org, Scope
from apps.tenancy.permissions import scope_required, sdk_principal

# The refusals of one receipt (as opposed to the request as a whole).
ReceiptRefusal = InvalidInput | ReceiptMalformed | ReceiptRejected | ChainConstraint | QuotaExceeded


class BatchTooLarge(InvalidInput):
    status = HTTPStatus.BAD_REQUEST
    code = "batch_too_large"


def parse_body(body: bytes) -> JsonValue:
    """The body parsed strictly (repeated member names and number spellings kept, so a
    receipt reaches the verifier exactly as sent); not JSON is ``invalid_json``."""
    try:
        return parse_json(body, max_depth=settings.JSON_BODY_MAX_DEPTH)
    except DecodeError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from error


def claimed_action_hash(value: JsonValue) -> str:
    """The ``content.action_hash`` a receipt claims, or "" when it has none to read."""
    members = object_members(value)
    content = dict(members).get("content") if members is not None else None
    content_members = object_members(content) if content is not None else None
    claimed = dict(content_members).get("action_hash") if content_members is not None else None
    return claimed if isinstance(claimed, str) else ""


def checked_receipt(value: JsonValue, *, org: Org) -> BatchItem:
    """A verified receipt, or its refusal: not an object / no ``content`` object is
    ``InvalidInput``, a decode failure ``ReceiptMalformed``, any other verdict
    ``ReceiptRejected`` (server.md §2)."""
    members = object_members(value)
    if members is None:
        raise InvalidInput("the receipt must be a JSON object")
    content = dict(members).get("content")
    if content is None or object_members(content) is None:
        raise InvalidInput("content: must be present and a JSON object")
    receipt, trust_level = verified_receipt(value, org=org)
    return BatchItem(receipt=receipt, trust_level=trust_level)


def rejection_reason(refusal: DomainError) -> str:
    """``"<kind>: <detail>"``: the verdict kind for verification refusals (server.md §2),
    the error code for the others."""
    if isinstance(refusal, ReceiptRejected | ReceiptMalformed):
        return refusal.message
    if isinstance(refusal, InvalidInput):
        return f"Malformed: {refusal.message}"
    detail = refusal.message.removeprefix("chain constraint: ")
    return f"{refusal.code}: {detail}"


def accepted_result(outcome: AppendOutcome) -> dict[str, Any]:
    """``OutboxPushResult`` of a stored receipt, with the level the service stored and the
    receipt's own claim where it differs (server.md §1; members the SDKs ignore)."""
    result: dict[str, Any] = {
        "receiptId": outcome.action_hash,
        "accepted": True,
        "trustLevel": outcome.trust_level,
    }
    if outcome.claimed_trust_level:
        result["claimedTrustLevel"] = outcome.claimed_trust_level
    return result


def refused_result(receipt_id: str, refusal: DomainError) -> dict[str, Any]:
    return {
        "receiptId": receipt_id,
        "accepted": False,
        "rejectionReason": rejection_reason(refusal),
    }


@extend_schema_view(
    post=extend_schema(
        operation_id="receipt_push",
        summary="Submit one signed receipt to the outbox (scope receipts:write)",
        tags=["receipts"],
        request=json_body("ActionReceipt"),
        responses={
            201: ok("OutboxPushResult", "Stored (`accepted` true)."),
            200: ok("OutboxPushResult", "Already stored (the same `action_hash`)."),
            **teampath_errors(
                body=True,
                s400=teampath_error(
                    ["invalid_json", "validation_failed"],
                    "Not JSON, not an object with a `content` object, or the receipt does not "
                    "decode (`rejectionReason` `Malformed: ...`)",
                    members=receipt_refusal(required=False),
                ),
                s409=teampath_error(
                    ["chain_constraint"],
                    "A session-continuity refusal: a fork or a broken link",
                    members=receipt_refusal(required=True),
                ),
                s422=teampath_error(
                    ["receipt_rejected"],
                    "Fails server-side re-verification",
                    members=receipt_refusal(required=True),
                ),
                s429=teampath_error(
                    ["quota_exceeded", "rate_limited"],
                    "The monthly receipt quota is used up (with the result members; `Retry-After` "
                    "until next month) or over the request rate",
                    members=receipt_refusal(required=False),
                ),
            ),
        },
    )
)
class ReceiptPushApi(TeamPathApi):
    """One receipt: 201 stored, 200 already stored; a refusal of the receipt answers its
    error status with the ``OutboxPushResult`` members beside ``error`` and ``message``."""

    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    def post(self, request: Request) -> Response:
        principal = sdk_principal(request)
        body = read_json_bytes(request)
        value = parse_body(body)
        if object_members(value) is None:
            raise InvalidInput("the body must be the receipt, a JSON object")
        receipt_id = claimed_action_hash(value)
        try:
            item = checked_receipt(value, org=principal.org)
            outcome = receipt_append(
                org=principal.org,
                receipt=item.receipt,
                trust_level=item.trust_level,
                api_key=principal.api_key,
            )
        except (
            InvalidInput,
            ReceiptMalformed,
            ReceiptRejected,
            ChainConstraint,
            QuotaExceeded,
        ) as e:
            if isinstance(e, ReceiptRejected | ReceiptMalformed):
                record_refusal(principal.org, e)
            return domain_error_response(e, **refused_result(receipt_id, e))
        return Response(
            accepted_result(outcome),
            status=HTTPStatus.CREATED if outcome.appended else HTTPStatus.OK,
        )


def record_refusal(org: Org, refusal: ReceiptRejected | ReceiptMalformed) -> None:
    """Count a refused receipt by verdict kind (analytics, metrics)."""
    refusal_record(
        org=org,
        kind=refusal.kind if isinstance(refusal, ReceiptRejected) else "Malformed",
        action_hash=refusal.action_hash if isinstance(refusal, ReceiptRejected) else "",
    )


@dataclass(frozen=True)
class _Slot:
    """One position of a batch: the receipt's id and either its verified form or why not."""

    receipt_id: str
    item: BatchItem | None = None
    refusal: DomainError | None = None


def parse_batch_body(value: JsonValue) -> list[JsonValue]:
    """The ``receipts`` array of ``{"receipts": [...]}``: 1 to ``TEAMPATH_BATCH_MAX`` items."""
    members = object_members(value)
    if members is None:
        raise InvalidInput("the body must be a JSON object {receipts: [...]}")
    names = [name for name, _ in members]
    if len(names) != len(set(names)):
        raise InvalidInput("the body repeats a member name")
    unknown = sorted(set(names) - {"receipts"})
    if unknown:
        raise InvalidInput(f"unknown member(s): {', '.join(unknown)}")
    receipts = dict(members).get("receipts")
    if receipts is None:
        raise InvalidInput("receipts: this member is required")
    if not isinstance(receipts, list):
        raise InvalidInput("receipts: must be an array of receipts")
    if not receipts:
        raise InvalidInput("receipts: must hold at least one receipt")
    limit: int = settings.TEAMPATH_BATCH_MAX
    if len(receipts) > limit:
        raise BatchTooLarge(f"receipts: at most {limit} receipts per batch, got {len(receipts)}")
    return receipts


@extend_schema_view(
    post=extend_schema(
        operation_id="receipt_push_batch",
        summary="Submit several receipts; one result per receipt, in order (receipts:write)",
        tags=["receipts"],
        request=json_body("ReceiptBatchRequest"),
        responses={
            200: ok(list_of("OutboxPushResult"), "One result per receipt, in the order sent."),
            **teampath_errors(
                body=True,
                s400=teampath_error(
                    ["invalid_json", "validation_failed", "batch_too_large"],
                    "Not JSON, not `{receipts: [...]}` with 1 to the batch limit receipts",
                ),
            ),
        },
    )
)
class ReceiptBatchPushApi(TeamPathApi):
    """Several receipts: 200 with one ``OutboxPushResult`` per receipt, in order.

    Each receipt is verified on its own, so one bad receipt never blocks the others; the
    accepted ones are appended in array order under one lock (contiguous ``seq``). Only
    errors of the request as a whole (not JSON, wrong shape, empty, too many) are 4xx.
    """

    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    def post(self, request: Request) -> Response:
        principal = sdk_principal(request)
        body = read_json_bytes(request)
        values = parse_batch_body(parse_body(body))
        slots = [self._check(value, principal.org) for value in values]
        for slot in slots:
            if isinstance(slot.refusal, ReceiptRejected | ReceiptMalformed):
                record_refusal(principal.org, slot.refusal)
        items = [slot.item for slot in slots if slot.item is not None]
        appended = iter(
            receipt_append_batch(org=principal.org, items=items, api_key=principal.api_key)
        )
        results = [self._result(slot, appended) for slot in slots]
        return Response(results, status=HTTPStatus.OK)

    @staticmethod
    def _check(value: JsonValue, org: Org) -> _Slot:
        receipt_id = claimed_action_hash(value)
        try:
            return _Slot(receipt_id=receipt_id, item=checked_receipt(value, org=org))
        except (InvalidInput, ReceiptMalformed, ReceiptRejected) as refusal:
            return _Slot(receipt_id=receipt_id, refusal=refusal)

    @staticmethod
    def _result(slot: _Slot, appended: Iterator[BatchResult]) -> dict[str, Any]:
        if slot.refusal is not None:
            return refused_result(slot.receipt_id, slot.refusal)
        outcome = next(appended)
        if isinstance(outcome, AppendOutcome):
            return accepted_result(outcome)
        return refused_result(slot.receipt_id, outcome)
