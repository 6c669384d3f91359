"""Key-scoped approval routes (SDK plane) and approver-key registration."""

from __future__ import annotations

import base64
import binascii
from http import HTTPStatus
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import KeyScopedSdkApi
from apps.api.openapi import (
    HEX64,
    keyscoped_error,
    keyscoped_errors,
    ok,
    path_parameter,
)
from apps.api.permissions import scope_required, sdk_principal
from apps.api.serializers import (
    BaseOutputSerializer,
    Ed25519KeyField,
    HashField,
    IsoDateTimeField,
    JsonObjectField,
    RawJsonField,
    StrictCharField,
)
from apps.approvals.models import Approval, ApprovalStatus
from apps.approvals.selectors import approval_get
from apps.approvals.services import (
    approval_assembly,
    approval_open,
    approval_vote,
    approver_key_register,
)
from apps.common.errors import InvalidInput
from apps.common.json_body import read_body_members
from apps.receipts.verifier import (
    DecodeError,
    JsonValue,
    decode_content,
)
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Scope


class ApprovalViewSerializer(BaseOutputSerializer):
    """The approval as every key-scoped approval route answers it."""

    omit_when_empty = ("decided_locally",)

    approval_id = serializers.CharField(help_text='`"apr_"` + random')
    action_hash = HashField()
    status = serializers.SerializerMethodField()
    threshold = serializers.IntegerField(min_value=1)
    approved_count = serializers.IntegerField(min_value=0)
    resolved_at = IsoDateTimeField(allow_null=True, help_text="null while pending")
    decided_locally = serializers.CharField(
        source="local_decision",
        required=False,
        help_text="Only when the agent's own unsigned lifecycle link closed it (status "
        "`rejected`: no human decision is recorded): that link's kind, `approved`, "
        "`denied`, `expired` or `completed`.",
    )

    @extend_schema_field(
        {"type": "string", "enum": [ApprovalStatus.PENDING, ApprovalStatus.APPROVED,
                                    ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED]}
    )  # fmt: skip
    def get_status(self, approval: Approval) -> str:
        return approval.api_status

    class Meta:
        ref_name = "ApprovalView"


ACTION_HASH_PARAMETER = path_parameter("action_hash", "The suspended action's hash.", HEX64)


class ApprovalOpenApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        # ``action_hash`` is the suspended content's hash or the SDK's suspend ticket;
        # ``rule_id`` "" (the SDK's default) means absent. matched_conditions and scope are
        # kept as display context. Unknown members are ignored.
        action_hash = HashField(
            help_text="The suspended content's action_hash, or the SDK's suspend ticket."
        )
        rule_id = StrictCharField(
            required=False,
            allow_blank=True,
            max_length=200,
            help_text='The scope the approver token must cover; `""` means absent (the '
            "suspended content's `policy.rule_id`).",
        )
        threshold = serializers.IntegerField(required=False, default=1, min_value=1, max_value=100)
        workflow = StrictCharField(
            required=False, allow_blank=True, default="", help_text="Display context."
        )
        account = StrictCharField(
            required=False, allow_blank=True, default="", help_text="Display context."
        )
        matched_conditions = serializers.ListField(
            child=serializers.DictField(),
            required=False,
            default=list,
            max_length=100,
            help_text="Display context.",
        )
        scope = StrictCharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=200,
            help_text="Display context.",
        )

        class Meta:
            ref_name = "ApprovalOpenRequest"

    @extend_schema(
        operation_id="approval_open",
        summary="Open, or re-open, the approval of a suspended action (scope approvals:write)",
        tags=["approvals"],
        request=InputSerializer,
        responses={
            201: ok(ApprovalViewSerializer, "Opened, `pending`."),
            200: ok(ApprovalViewSerializer, "It existed already: the existing approval."),
            **keyscoped_errors(
                403,
                s409=keyscoped_error("A suspend ticket shared by two suspended receipts."),
                s422=keyscoped_error(
                    "Not JSON or fails validation. Never for want of approver keys: the roster "
                    "freezes at the first vote."
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        opened = approval_open(org=sdk_principal(request).org, **data.validated_data)
        return Response(
            ApprovalViewSerializer(opened.approval).data,
            status=HTTPStatus.CREATED if opened.created else HTTPStatus.OK,
        )


class ApprovalDetailApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    @extend_schema(
        operation_id="approval_detail",
        summary="Poll an approval by the action it gates (scope approvals:write)",
        tags=["approvals"],
        parameters=[ACTION_HASH_PARAMETER],
        responses={
            200: ok(ApprovalViewSerializer, "Expiry applied on read."),
            **keyscoped_errors(
                403,
                404,
                s409=keyscoped_error("A suspend ticket shared by two suspended receipts."),
            ),
        },
    )
    def get(self, request: Request, action_hash: str) -> Response:
        approval = approval_get(org=sdk_principal(request).org, action_hash=action_hash)
        return Response(ApprovalViewSerializer(approval).data)


class ApprovalSubmitTokenApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        """The vote; ``action_content`` is decoded strictly from the raw body (server.md §1
        rules), every other member is held to the plain-body rules."""

        token_b64 = StrictCharField(
            allow_blank=True,
            trim_whitespace=False,
            help_text="The approval token's wire bytes, base64.",
            error_messages={
                key: "required, a base64 string" for key in ("required", "invalid", "null")
            },
        )
        action_content = JsonObjectField(
            help_text="The suspended receipt's content the token signs over.",
            error_messages={"required": "required"},
        )
        decision = serializers.ChoiceField(
            ["approved", "rejected"],
            required=False,
            allow_null=True,
            help_text="Must match the token's signed decision (else 403).",
            error_messages={"invalid_choice": "must be approved or rejected"},
        )
        reason = StrictCharField(
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            default="",
            max_length=2000,
            help_text="Display context.",
            error_messages={
                key: "a string of at most 2000 characters"
                for key in ("invalid", "null", "max_length")
            },
        )
        required_scope = RawJsonField(
            required=False,
            help_text="Ignored: the scope is bound to the approval's rule server-side.",
        )
        record = serializers.CharField(
            required=False,
            help_text="A co-signed leg: the ApproverRecord, JSON text (with co_sig_b64).",
        )
        co_sig_b64 = serializers.CharField(required=False, help_text="The leg's signature, base64.")

        class Meta:
            ref_name = "SubmitTokenRequest"

        def to_internal_value(self, data: Any) -> Any:
            # record and co_sig_b64 keep their own rules (below), as sent; required_scope is
            # ignored whatever it holds.
            kept = {name: data[name] for name in ("record", "co_sig_b64") if name in data}
            plain = {
                name: value
                for name, value in data.items()
                if name not in ("record", "co_sig_b64", "required_scope")
            }
            validated: dict[str, Any] = dict(super().to_internal_value(plain))
            return {**validated, **kept}

        def validate_token_b64(self, token_b64: str) -> bytes:
            try:
                return base64.b64decode(token_b64, validate=True)
            except (binascii.Error, ValueError):
                raise serializers.ValidationError("not valid base64") from None

        def validate_action_content(self, content: JsonValue) -> Any:
            try:
                return decode_content(content)
            except DecodeError as error:
                raise serializers.ValidationError(str(error)) from error

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            record, co_sig = attrs.get("record"), attrs.get("co_sig_b64")
            if record is not None and not isinstance(record, str):
                raise serializers.ValidationError(
                    {"record": "the ApproverRecord as JSON text (a string)"}
                )
            if (record is None) != (co_sig is None) or (
                co_sig is not None and not isinstance(co_sig, str)
            ):
                # A rule of the body as a whole: worded without a member name.
                raise InvalidInput("record and co_sig_b64 go together (both strings)")
            return {
                "token": attrs["token_b64"],
                "action_content": attrs["action_content"],
                "decision": attrs.get("decision"),
                "record": record,
                "co_sig_b64": co_sig,
                "reason": attrs["reason"],
            }

    @extend_schema(
        operation_id="approval_submit_token",
        summary="Record one vote from a human-signed approval token (scope approvals:write)",
        tags=["approvals"],
        parameters=[ACTION_HASH_PARAMETER],
        request=InputSerializer,
        responses={
            200: ok(ApprovalViewSerializer, "The updated approval."),
            **keyscoped_errors(
                404,
                413,
                s403=keyscoped_error(
                    "The key lacks the scope, or the token is refused (the reason in `detail`)."
                ),
                s409=keyscoped_error(
                    "`action_content` does not hash to `action_hash`, the suspended receipt is "
                    "not pushed yet, a second vote by the same approver key, a vote on a "
                    "resolved or expired approval, fewer eligible approver keys than the "
                    "threshold, or an ambiguous suspend ticket."
                ),
                s422=keyscoped_error(
                    "Not JSON or fails validation, or a co-signed leg is refused."
                ),
            ),
        },
    )
    def post(self, request: Request, action_hash: str) -> Response:
        org = sdk_principal(request).org
        members = read_body_members(request, raw=["action_content"])
        data = self.InputSerializer(data=members)
        data.is_valid(raise_exception=True)
        approval = approval_vote(org=org, action_hash=action_hash, **data.validated_data)
        return Response(ApprovalViewSerializer(approval).data)


class ApprovalAssemblyApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class OutputSerializer(serializers.Serializer[Any]):
        """What the SDK assembles the L1 receipt from (approvals.md §8)."""

        class LegSerializer(serializers.Serializer[Any]):
            record = serializers.CharField()
            approver_pubkey_b64 = serializers.CharField()
            co_sig_b64 = serializers.CharField()

            class Meta:
                ref_name = "ApprovalAssemblyLeg"

        legs = LegSerializer(many=True)
        threshold = serializers.IntegerField(min_value=1)
        roster = serializers.ListField(child=serializers.CharField())
        suspended_content = JsonObjectField()

        class Meta:
            ref_name = "ApprovalAssembly"

    @extend_schema(
        operation_id="approval_assembly",
        summary="The co-signed legs to assemble the L1 receipt from (scope approvals:write)",
        tags=["approvals"],
        parameters=[ACTION_HASH_PARAMETER],
        responses={
            200: ok(OutputSerializer),
            **keyscoped_errors(
                403,
                404,
                s409=keyscoped_error(
                    "Not yet approved, or approved with co-signed legs still missing (how many "
                    "in `detail`)."
                ),
            ),
        },
    )
    def get(self, request: Request, action_hash: str) -> Response:
        assembly = approval_assembly(org=sdk_principal(request).org, action_hash=action_hash)
        return Response(self.OutputSerializer(assembly).data)


class ApproverKeyRegisterApi(KeyScopedSdkApi):
    """POST /v1/orgs/register-approver-pubkey: scope ``approvers:write`` only."""

    permission_classes = [
        scope_required(
            Scope.APPROVERS_WRITE,
            message=(
                "API key lacks scope approvers:write, which registering approver keys needs. "
                "It is never granted by default: issue a key with it (manage.py issue_api_key "
                "<org> --scopes approvers:write), or register the key in the console (manager "
                "role) or with manage.py register_approver_key."
            ),
        )
    ]

    class InputSerializer(serializers.Serializer[Any]):
        key_id = StrictCharField(required=False, allow_blank=True, max_length=100)
        public_key = Ed25519KeyField()
        label = StrictCharField(required=False, allow_blank=True, default="", max_length=200)  # type: ignore[assignment]

        class Meta:
            ref_name = "ApproverKeyRegisterRequest"

    class OutputSerializer(serializers.Serializer[Any]):
        status = serializers.ChoiceField(["registered"])
        key_id = serializers.CharField()
        public_key = serializers.CharField()
        label = serializers.CharField()  # type: ignore[assignment]
        change = serializers.ChoiceField(
            ["registered", "unchanged", "rotated"],
            help_text="What the upsert did; a rotation revoked the key id's old key.",
        )

        class Meta:
            ref_name = "ApproverKey"

    @extend_schema(
        operation_id="approver_key_register",
        summary="Register an approver's Ed25519 public key (scope approvers:write only)",
        tags=["approvals"],
        request=InputSerializer,
        responses={
            200: ok(
                OutputSerializer,
                "Registered, unchanged (same key id and key) or rotated (same key id, new key: "
                "the old key is revoked).",
            ),
            **keyscoped_errors(
                403,
                s409=keyscoped_error(
                    "The placeholder decision key, an operator key seen in the org's receipts, "
                    "or a key registered (or revoked) under another key id."
                ),
                s422=keyscoped_error("Not JSON or fails validation (not a 32-byte base64 key)."),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        principal = sdk_principal(request)
        registered = approver_key_register(
            org=principal.org,
            public_key=data.validated_data["public_key"],
            key_id=data.validated_data.get("key_id") or None,
            label=data.validated_data["label"],
            actor=Actor.api(api_key=principal.api_key),
        )
        key = registered.key
        answer = {
            "status": "registered",
            "key_id": key.key_id,
            "public_key": key.public_key,
            "label": key.label,
            "change": registered.change,
        }
        return Response(self.OutputSerializer(answer).data)
