"""Key-scoped approval routes (SDK plane) and approver-key registration."""

from __future__ import annotations

import base64
import binascii
from http import HTTPStatus
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import KeyScopedSdkApi
from apps.approvals.models import Approval
from apps.approvals.selectors import approval_get
from apps.approvals.services import (
    approval_assembly,
    approval_open,
    approval_vote,
    approver_key_register,
)
from apps.common.errors import InvalidInput, InvalidJson
from apps.common.json_body import plain_member, read_json_bytes
from apps.common.openapi import (
    HEX64,
    json_body,
    keyscoped_error,
    keyscoped_errors,
    ok,
    path_parameter,
)
from apps.receipts.verifier import DecodeError, decode_content, object_members, parse_json
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Scope
from apps.tenancy.permissions import scope_required, sdk_principal

ACTION_HASH_PATTERN = r"^[0-9a-f]{64}$"


def approval_view(approval: Approval) -> dict[str, Any]:
    """``ApprovalView``; ``resolved_at`` is null while pending."""
    return {
        "approval_id": approval.approval_id,
        "action_hash": approval.action_hash,
        "status": approval.status,
        "threshold": approval.threshold,
        "approved_count": approval.approved_count,
        "resolved_at": approval.resolved_at.isoformat() if approval.resolved_at else None,
    }


ACTION_HASH_PARAMETER = path_parameter("action_hash", "The suspended action's hash.", HEX64)


@extend_schema_view(
    post=extend_schema(
        operation_id="approval_open",
        summary="Open, or re-open, the approval of a suspended action (scope approvals:write)",
        tags=["approvals"],
        request=json_body("ApprovalOpenRequest"),
        responses={
            201: ok("ApprovalView", "Opened, `pending`."),
            200: ok("ApprovalView", "It existed already: the existing approval."),
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
)
class ApprovalOpenApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        # ``action_hash`` is the suspended content's hash or the SDK's suspend ticket;
        # ``rule_id`` "" (the SDK's default) means absent. matched_conditions and scope are
        # kept as display context. Unknown members are ignored.
        action_hash = serializers.RegexField(ACTION_HASH_PATTERN)
        rule_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
        threshold = serializers.IntegerField(required=False, default=1, min_value=1, max_value=100)
        workflow = serializers.CharField(required=False, allow_blank=True, default="")
        account = serializers.CharField(required=False, allow_blank=True, default="")
        matched_conditions = serializers.ListField(
            child=serializers.JSONField(), required=False, default=list, max_length=100
        )
        scope = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)

    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        opened = approval_open(org=sdk_principal(request).org, **data.validated_data)
        return Response(
            approval_view(opened.approval),
            status=HTTPStatus.CREATED if opened.created else HTTPStatus.OK,
        )


@extend_schema_view(
    get=extend_schema(
        operation_id="approval_detail",
        summary="Poll an approval by the action it gates (scope approvals:write)",
        tags=["approvals"],
        parameters=[ACTION_HASH_PARAMETER],
        responses={
            200: ok("ApprovalView", "Expiry applied on read."),
            **keyscoped_errors(403, 404),
        },
    )
)
class ApprovalDetailApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def get(self, request: Request, action_hash: str) -> Response:
        approval = approval_get(org=sdk_principal(request).org, action_hash=action_hash)
        return Response(approval_view(approval))


def _submit_body(raw: bytes) -> dict[str, Any]:
    """The submit-token body, with ``action_content`` decoded strictly from the raw bytes
    (server.md §1 rules); every other member is held to the plain-body rules."""
    try:
        members = object_members(parse_json(raw, max_depth=settings.JSON_BODY_MAX_DEPTH))
    except DecodeError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from error
    if members is None:
        raise InvalidInput("the body must be a JSON object")
    names = [name for name, _ in members]
    if len(names) != len(set(names)):
        raise InvalidInput("the body repeats a member name")
    body = {
        name: value if name == "action_content" else plain_member(name, value)
        for name, value in members
    }
    token_b64 = body.get("token_b64")
    if not isinstance(token_b64, str):
        raise InvalidInput("token_b64: required, a base64 string")
    try:
        token = base64.b64decode(token_b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("token_b64: not valid base64") from None
    if "action_content" not in body:
        raise InvalidInput("action_content: required")
    try:
        content = decode_content(body["action_content"])
    except DecodeError as error:
        raise InvalidInput(f"action_content: {error}") from error
    decision = body.get("decision")
    if decision is not None and decision not in ("approved", "rejected"):
        raise InvalidInput("decision: must be approved or rejected")
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > 2000:
        raise InvalidInput("reason: a string of at most 2000 characters")
    record = body.get("record")
    co_sig = body.get("co_sig_b64")
    if record is not None and not isinstance(record, str):
        raise InvalidInput("record: the ApproverRecord as JSON text (a string)")
    if (record is None) != (co_sig is None) or (co_sig is not None and not isinstance(co_sig, str)):
        raise InvalidInput("record and co_sig_b64 go together (both strings)")
    return {
        "token": token,
        "action_content": content,
        "decision": decision,
        "record": record,
        "co_sig_b64": co_sig,
        "reason": reason,
    }


@extend_schema_view(
    post=extend_schema(
        operation_id="approval_submit_token",
        summary="Record one vote from a human-signed approval token (scope approvals:write)",
        tags=["approvals"],
        parameters=[ACTION_HASH_PARAMETER],
        request=json_body("SubmitTokenRequest"),
        responses={
            200: ok("ApprovalView", "The updated approval."),
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
)
class ApprovalSubmitTokenApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def post(self, request: Request, action_hash: str) -> Response:
        org = sdk_principal(request).org
        body = _submit_body(read_json_bytes(request))
        approval = approval_vote(org=org, action_hash=action_hash, **body)
        return Response(approval_view(approval))


@extend_schema_view(
    get=extend_schema(
        operation_id="approval_assembly",
        summary="The co-signed legs to assemble the L1 receipt from (scope approvals:write)",
        tags=["approvals"],
        parameters=[ACTION_HASH_PARAMETER],
        responses={
            200: ok("ApprovalAssembly"),
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
)
class ApprovalAssemblyApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def get(self, request: Request, action_hash: str) -> Response:
        return Response(approval_assembly(org=sdk_principal(request).org, action_hash=action_hash))


@extend_schema_view(
    post=extend_schema(
        operation_id="approver_key_register",
        summary="Register an approver's Ed25519 public key (scope approvers:write only)",
        tags=["approvals"],
        request=json_body("ApproverKeyRegisterRequest"),
        responses={
            200: ok(
                "ApproverKey",
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
)
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
        key_id = serializers.CharField(required=False, allow_blank=True, max_length=100)
        public_key = serializers.CharField(max_length=100)
        label = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)  # type: ignore[assignment]

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
        return Response(
            {
                "status": "registered",
                "key_id": key.key_id,
                "public_key": key.public_key,
                "label": key.label,
                "change": registered.change,
            }
        )
