"""Team-path receipt routes: ``POST /v1/receipts`` and ``POST /v1/receipts/batch``.

The body of a single push is the signed receipt itself; a batch is ``{"receipts": [...]}``.
Both answer ``OutboxPushResult {receiptId, accepted, rejectionReason?}`` (the batch: a JSON
array of them, in the order sent), where ``receiptId`` is the receipt's ``action_hash``.
Both go through the one receipt intake (``receipt_intake`` / ``receipt_intake_batch``),
as the key-scoped push does. Status codes and error codes: docs/teampath-errors.md.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.http import HttpResponseBase
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.openapi import ok, receipt_refusal, ref, teampath_error, teampath_errors
from apps.api.permissions import scope_required, sdk_principal
from apps.api.push import parse_body, push_receipt, push_response
from apps.api.serializers import BaseOutputSerializer, BatchReceiptField
from apps.api.teampath.base import TeamPathApi, domain_error_response
from apps.approvals.services import (
    RECEIPT_REFUSALS,
    claimed_action_hash,
    receipt_intake,
    receipt_intake_batch,
)
from apps.common.errors import DomainError, InvalidInput
from apps.common.json_body import read_json_bytes
from apps.common.vocabulary import TRUST_LEVELS
from apps.receipts.errors import (
    BatchTooLarge,
    ReceiptMalformed,
    ReceiptRejected,
)
from apps.receipts.services import AppendOutcome
from apps.receipts.verifier import JsonValue, object_members
from apps.tenancy.models import Scope


def rejection_reason(refusal: DomainError) -> str:
    """``"<kind>: <detail>"``: the verdict kind for verification refusals (server.md §2),
    the error code for the others."""
    if isinstance(refusal, ReceiptRejected | ReceiptMalformed):
        return refusal.message
    if isinstance(refusal, InvalidInput):
        return f"Malformed: {refusal.message}"
    detail = refusal.message.removeprefix("chain constraint: ")
    return f"{refusal.code}: {detail}"


class OutboxPushResultSerializer(BaseOutputSerializer):
    """``OutboxPushResult`` of one receipt: stored (with the level the service stored and the
    receipt's own claim where it differs, server.md §1; members the SDKs ignore) or refused
    (with the reason). Its instance is a dict with the snake_case names."""

    omit_when_empty = ("trustLevel", "claimedTrustLevel", "rejectionReason")

    receiptId = serializers.CharField(  # the wire names are camelCase
        source="receipt_id",
        help_text='The receipt\'s `content.action_hash` ("" when it has none).',
    )
    accepted = serializers.BooleanField()
    trustLevel = serializers.ChoiceField(
        TRUST_LEVELS,
        source="trust_level",
        required=False,
        help_text="Only when accepted: the level the service derived and stored.",
    )
    claimedTrustLevel = serializers.ChoiceField(
        TRUST_LEVELS,
        source="claimed_trust_level",
        required=False,
        help_text="Only where the receipt's own claim differs (lifecycle links).",
    )
    rejectionReason = serializers.CharField(
        source="rejection_reason",
        required=False,
        help_text='Only when refused: `"<kind>: <detail>"` (e.g. `Malformed: ...`).',
    )

    class Meta:
        ref_name = "OutboxPushResult"


def accepted_result(outcome: AppendOutcome) -> dict[str, Any]:
    """``OutboxPushResult`` of a stored receipt.

    Built directly, not through ``OutboxPushResultSerializer`` (which stays the description
    of the answer): a batch answers up to ``TEAMPATH_BATCH_MAX`` of them, and a serializer
    deep-copies its fields for every instance, which cost more than the append itself.
    ``tests/api/test_teampath_receipt_results.py`` holds the two to the same output."""
    result: dict[str, Any] = {"receiptId": outcome.action_hash, "accepted": True}
    if outcome.trust_level:  # the serializer's omit_when_empty, member by member
        result["trustLevel"] = outcome.trust_level
    if outcome.claimed_trust_level:
        result["claimedTrustLevel"] = outcome.claimed_trust_level
    return result


def refused_result(receipt: JsonValue, refusal: DomainError) -> dict[str, Any]:
    """``OutboxPushResult`` of a refused receipt, named by the hash it claims (built
    directly, as :func:`accepted_result` is)."""
    return {
        "receiptId": claimed_action_hash(receipt),
        "accepted": False,
        "rejectionReason": rejection_reason(refusal),
    }


@extend_schema_view(
    post=extend_schema(
        operation_id="receipt_push",
        summary="Submit one signed receipt to the outbox (scope receipts:write)",
        tags=["receipts"],
        request={"application/json": ref("ActionReceipt")},
        responses={
            201: ok(OutboxPushResultSerializer, "Stored (`accepted` true)."),
            200: ok(OutboxPushResultSerializer, "Already stored (the same `action_hash`)."),
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

    def post(self, request: Request) -> HttpResponseBase:
        principal = sdk_principal(request)
        value = push_receipt(request)
        try:
            outcome = receipt_intake(
                org=principal.org, receipt=value, api_key=principal.api_key, open_approval=False
            )
        except RECEIPT_REFUSALS as refusal:
            return domain_error_response(refusal, **refused_result(value, refusal))
        return push_response(accepted_result(outcome), appended=outcome.appended)


class ReceiptBatchInputSerializer(serializers.Serializer[Any]):
    """``{"receipts": [...]}``: 1 to ``TEAMPATH_BATCH_MAX`` receipts, each handed on as the
    strict decoder parsed it. The body as a whole is checked here: too many receipts
    is its own code (``batch_too_large``), which a list field's length check cannot say."""

    # The route's validator: it reads the strictly parsed body itself (a repeated member
    # name is only visible before it is a dict); every item is judged on its own by the
    # intake, so none is refused here.
    refuses_unknown_members = True  # documented as a closed object

    receipts = serializers.ListField(
        child=BatchReceiptField(),
        min_length=1,
        max_length=settings.TEAMPATH_BATCH_MAX,
    )

    class Meta:
        ref_name = "ReceiptBatchRequest"

    def run_validation(self, data: Any = empty) -> Any:
        # A ``null`` body is refused like any other non-object, in the same words.
        return self.to_internal_value(data)

    def to_internal_value(self, data: Any) -> dict[str, list[JsonValue]]:
        members = object_members(data)
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
            raise BatchTooLarge(
                f"receipts: at most {limit} receipts per batch, got {len(receipts)}"
            )
        return {"receipts": receipts}


@extend_schema_view(
    post=extend_schema(
        operation_id="receipt_push_batch",
        summary="Submit several receipts; one result per receipt, in order (receipts:write)",
        tags=["receipts"],
        request=ReceiptBatchInputSerializer,
        responses={
            200: ok(
                OutboxPushResultSerializer(many=True), "One result per receipt, in the order sent."
            ),
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
        data = ReceiptBatchInputSerializer(data=parse_body(read_json_bytes(request)))
        data.is_valid(raise_exception=True)
        receipts = data.validated_data["receipts"]
        outcomes = receipt_intake_batch(
            org=principal.org, receipts=receipts, api_key=principal.api_key
        )
        results = [
            accepted_result(outcome)
            if isinstance(outcome, AppendOutcome)
            else refused_result(receipt, outcome)
            for receipt, outcome in zip(receipts, outcomes, strict=True)
        ]
        return Response(results, status=HTTPStatus.OK)
