"""Key-scoped receipt route: POST /v1/receipts."""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import KeyScopedSdkApi
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok
from apps.api.permissions import scope_required, sdk_principal
from apps.api.push import FastInput, push_members, push_response
from apps.api.serializers import BaseOutputSerializer, HashField, ReceiptField
from apps.approvals.services import claimed_action_hash, receipt_intake
from apps.common.vocabulary import TRUST_LEVELS
from apps.receipts.errors import QuotaExceeded
from apps.receipts.services import AppendOutcome
from apps.receipts.verifier import JsonValue, object_members
from apps.tenancy.models import Scope

_HEX64 = re.compile("[0-9a-f]{64}")


class ReceiptPushApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]

    class InputSerializer(FastInput):
        """``{receipt, supersedes_action_hash?}``; unknown members are ignored."""

        raw_members = ("receipt",)
        shape = "{receipt, supersedes_action_hash?}"

        receipt = ReceiptField(error_messages={"required": "this member is required"})
        supersedes_action_hash = HashField(
            required=False,
            allow_null=True,
            help_text="Only when finalizing an approval: the suspended L0 entry this freshly "
            "assembled L1 receipt supersedes.",
            error_messages={"invalid": "must be 64 lowercase hex characters"},
        )

        class Meta:
            ref_name = "ReceiptPushRequest"

        def validate_receipt(self, receipt: JsonValue) -> JsonValue:
            if object_members(receipt) is None:
                raise serializers.ValidationError("must be a JSON object")
            return receipt

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            content = dict(object_members(attrs["receipt"]) or []).get("content")
            if content is None or object_members(content) is None:
                raise serializers.ValidationError(
                    {"receipt.content": "must be present and a JSON object"}
                )
            return attrs

        @classmethod
        def takes_as_is(cls, members: dict[str, Any]) -> bool:
            """A receipt with a ``content`` object and no supersede, or a well-formed one:
            what the fields and ``validate`` above pass unchanged."""
            supersedes = members.get("supersedes_action_hash")
            content = dict(object_members(members.get("receipt")) or []).get("content")
            hash_ok = supersedes is None or (
                isinstance(supersedes, str) and _HEX64.fullmatch(supersedes) is not None
            )
            return content is not None and object_members(content) is not None and hash_ok

    class OutputSerializer(BaseOutputSerializer):
        """The entry, with the level the service stored (server.md §1) and the receipt's
        own claim where it differs."""

        omit_when_empty = ("claimed_trust_level",)

        status = serializers.SerializerMethodField()
        entry_hash = serializers.CharField(
            source="action_hash", help_text="Echoes the receipt's `action_hash`."
        )
        seq = serializers.IntegerField(min_value=1, help_text="Per-org mirror position.")
        trust_level = serializers.ChoiceField(
            TRUST_LEVELS, help_text="The level the service derived and stored (server.md §1)."
        )
        claimed_trust_level = serializers.ChoiceField(
            TRUST_LEVELS,
            required=False,
            help_text="The receipt's own claim, only where it differs (lifecycle links).",
        )

        class Meta:
            ref_name = "ReceiptPushResponse"

        @extend_schema_field({"type": "string", "enum": ["appended", "duplicate"]})
        def get_status(self, outcome: AppendOutcome) -> str:
            return "appended" if outcome.appended else "duplicate"

    class QuotaSerializer(serializers.Serializer[Any]):
        """The org's monthly soft-cap is reached; the local chain is unaffected."""

        status = serializers.ChoiceField(["quota_exceeded"])
        entry_hash = serializers.CharField()
        seq = serializers.IntegerField(allow_null=True)
        detail = serializers.CharField()

        class Meta:
            ref_name = "ReceiptQuotaExceeded"

    @extend_schema(
        operation_id="receipt_push",
        summary="Mirror one signed receipt (scope receipts:write)",
        tags=["receipts"],
        request=InputSerializer,
        responses={
            201: ok(OutputSerializer, "Verified and appended (`status` `appended`)."),
            200: ok(OutputSerializer, "Already mirrored (`status` `duplicate`): its `seq`."),
            **keyscoped_errors(
                403,
                413,
                s402=ok(QuotaSerializer, "The org's monthly soft-cap is reached."),
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
    def post(self, request: Request) -> HttpResponseBase:
        principal = sdk_principal(request)
        data = push_members(request, self.InputSerializer)
        receipt = data["receipt"]
        try:
            outcome = receipt_intake(
                org=principal.org,
                receipt=receipt,
                supersedes_action_hash=data.get("supersedes_action_hash"),
                api_key=principal.api_key,
            )
        except QuotaExceeded as refusal:
            quota = {
                "status": "quota_exceeded",
                "entry_hash": claimed_action_hash(receipt),
                "seq": None,
                "detail": refusal.message,
            }
            return Response(self.QuotaSerializer(quota).data, status=refusal.status)
        return push_response(self.answer(outcome), appended=outcome.appended)

    @staticmethod
    def answer(outcome: AppendOutcome) -> dict[str, Any]:
        """What ``OutputSerializer(outcome).data`` is, written directly (the fast path of
        ``apps.api.push``)."""
        answer: dict[str, Any] = {
            "status": "appended" if outcome.appended else "duplicate",
            "entry_hash": outcome.action_hash,
            "seq": outcome.seq,
            "trust_level": outcome.trust_level,
        }
        if outcome.claimed_trust_level:
            answer["claimed_trust_level"] = outcome.claimed_trust_level
        return answer
