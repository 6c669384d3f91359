"""Key-scoped receipt route: POST /v1/receipts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.analytics.services import refusal_record
from apps.approvals.services import (
    approval_open_for_suspended,
    is_suspended,
    mirror_trust_level,
)
from apps.common.api import KeyScopedSdkApi
from apps.common.errors import InvalidInput, InvalidJson
from apps.common.json_body import plain_member, read_json_bytes
from apps.common.openapi import json_body, keyscoped_error, keyscoped_errors, ok
from apps.receipts.errors import QuotaExceeded, ReceiptMalformed, ReceiptRejected
from apps.receipts.services import AppendOutcome, receipt_append
from apps.receipts.verifier import (
    DecodedReceipt,
    DecodeError,
    JsonValue,
    Verdict,
    object_members,
    parse_json,
    verify_receipt_value,
)
from apps.tenancy.models import Org, Scope
from apps.tenancy.permissions import scope_required, sdk_principal

ACTION_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PushInput:
    receipt: JsonValue
    supersedes_action_hash: str | None


def parse_push_body(body: bytes) -> PushInput:
    """``{receipt, supersedes_action_hash?}`` from the raw body, parsed once and strictly.

    The body is parsed keeping repeated member names and number literals, so the receipt
    subtree reaches the verifier exactly as sent (receipts.md §15); every other member is
    held to the plain-body rules (no NUL, no repeated name, numbers in range).
    """
    try:
        parsed = parse_json(body, max_depth=settings.JSON_BODY_MAX_DEPTH)
    except DecodeError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from error
    members = object_members(parsed)
    if members is None:
        raise InvalidInput("the body must be a JSON object {receipt, supersedes_action_hash?}")
    names = [name for name, _ in members]
    if len(names) != len(set(names)):
        raise InvalidInput("the body repeats a member name")
    values = dict(members)
    for name, value in members:
        if name != "receipt":
            plain_member(name, value)
    if "receipt" not in values:
        raise InvalidInput("receipt: this member is required")
    receipt = values["receipt"]
    receipt_members = object_members(receipt)
    if receipt_members is None:
        raise InvalidInput("receipt: must be a JSON object")
    content = dict(receipt_members).get("content")
    if content is None or object_members(content) is None:
        raise InvalidInput("receipt.content: must be present and a JSON object")
    supersedes = values.get("supersedes_action_hash")
    if supersedes is not None and (
        not isinstance(supersedes, str) or not ACTION_HASH.fullmatch(supersedes)
    ):
        raise InvalidInput("supersedes_action_hash: must be 64 lowercase hex characters")
    return PushInput(receipt=receipt, supersedes_action_hash=supersedes)


def verified_receipt(receipt: JsonValue, *, org: Org) -> tuple[DecodedReceipt, str]:
    """The decoded receipt and the trust level the mirror derives for it in ``org``
    (server.md §1), or the refusal of server.md §2."""
    verdict: Verdict = verify_receipt_value(receipt)
    if verdict.stage == "decode":
        raise ReceiptMalformed(f"Malformed: {verdict.detail}")
    if not verdict.is_valid or verdict.receipt is None or verdict.trust_level is None:
        named = verdict.receipt.action_hash if verdict.receipt is not None else ""
        raise ReceiptRejected(verdict.kind, verdict.detail, action_hash=named)
    return verdict.receipt, mirror_trust_level(org=org, verdict=verdict)


def push_answer(outcome: AppendOutcome) -> dict[str, object]:
    """``ReceiptPushResponse``: the entry, with the level the service stored (server.md §1)
    and the receipt's own claim where it differs."""
    answer: dict[str, object] = {
        "status": "appended" if outcome.appended else "duplicate",
        "entry_hash": outcome.action_hash,
        "seq": outcome.seq,
        "trust_level": outcome.trust_level,
    }
    if outcome.claimed_trust_level:
        answer["claimed_trust_level"] = outcome.claimed_trust_level
    return answer


@extend_schema_view(
    post=extend_schema(
        operation_id="receipt_push",
        summary="Mirror one signed receipt (scope receipts:write)",
        tags=["receipts"],
        request=json_body("ReceiptPushRequest"),
        responses={
            201: ok("ReceiptPushResponse", "Verified and appended (`status` `appended`)."),
            200: ok("ReceiptPushResponse", "Already mirrored (`status` `duplicate`): its `seq`."),
            **keyscoped_errors(
                403,
                413,
                s402=ok("ReceiptQuotaExceeded", "The org's monthly soft-cap is reached."),
                s404=keyscoped_error("`supersedes_action_hash` names no mirrored receipt."),
                s409=keyscoped_error(
                    "Re-verification failed (`kind`), a refused supersede, or a chain constraint "
                    "(fork, broken session link).",
                    "ReceiptRefusal",
                ),
                s422=keyscoped_error(
                    "Not JSON / not `application/json`, `receipt` or `content` missing or not "
                    "objects, or the receipt does not decode (`kind` `Malformed`).",
                    "ReceiptRefusal",
                ),
            ),
        },
    )
)
class ReceiptPushApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    def post(self, request: Request) -> Response:
        principal = sdk_principal(request)
        body = read_json_bytes(request)
        push = parse_push_body(body)
        try:
            receipt, trust_level = verified_receipt(push.receipt, org=principal.org)
        except ReceiptRejected as refusal:
            refusal_record(org=principal.org, kind=refusal.kind, action_hash=refusal.action_hash)
            raise
        except ReceiptMalformed:
            refusal_record(org=principal.org, kind="Malformed")
            raise
        try:
            outcome = receipt_append(
                org=principal.org,
                receipt=receipt,
                trust_level=trust_level,
                supersedes_action_hash=push.supersedes_action_hash,
                api_key=principal.api_key,
            )
        except QuotaExceeded as refusal:
            return Response(
                {
                    "status": "quota_exceeded",
                    "entry_hash": receipt.action_hash,
                    "seq": None,
                    "detail": refusal.message,
                },
                status=refusal.status,
            )
        if outcome.appended and is_suspended(receipt.content):
            approval_open_for_suspended(
                org=principal.org,
                content=receipt.content,
                operator_keys=[key for key in [receipt.operator_public_key] if key],
            )
        return Response(
            push_answer(outcome), status=HTTPStatus.CREATED if outcome.appended else HTTPStatus.OK
        )
