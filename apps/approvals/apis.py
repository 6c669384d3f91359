"""Key-scoped approval routes (SDK plane) and approver-key registration."""

from __future__ import annotations

import base64
import binascii
from http import HTTPStatus
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.approvals.models import Approval
from apps.approvals.services import (
    approval_assembly,
    approval_get,
    approval_open,
    approval_vote,
    approver_key_register,
)
from apps.common.api import KeyScopedSdkApi
from apps.common.errors import InvalidInput, InvalidJson
from apps.common.http import read_json_body
from apps.receipts.verifier import DecodeError, decode_content, object_members, parse_json
from apps.tenancy.models import Scope
from apps.tenancy.permissions import scope_required, sdk_principal

ACTION_HASH_PATTERN = r"^[0-9a-f]{64}$"
MAX_BODY_BYTES = 1_048_576


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


class ApprovalOpenApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        # Unknown members (matched_conditions, scope, ...) are ignored.
        action_hash = serializers.RegexField(ACTION_HASH_PATTERN)
        rule_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
        threshold = serializers.IntegerField(required=False, default=1, min_value=1, max_value=100)
        workflow = serializers.CharField(required=False, allow_blank=True, default="")
        account = serializers.CharField(required=False, allow_blank=True, default="")

    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        opened = approval_open(org=sdk_principal(request).org, **data.validated_data)
        return Response(
            approval_view(opened.approval),
            status=HTTPStatus.CREATED if opened.created else HTTPStatus.OK,
        )


class ApprovalDetailApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def get(self, request: Request, action_hash: str) -> Response:
        approval = approval_get(org=sdk_principal(request).org, action_hash=action_hash)
        return Response(approval_view(approval))


def _submit_body(raw: bytes) -> dict[str, Any]:
    """The submit-token body, with ``action_content`` decoded strictly from the raw bytes."""
    try:
        members = object_members(parse_json(raw))
    except DecodeError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from error
    if members is None:
        raise InvalidInput("the body must be a JSON object")
    body = dict(members)
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
    decision = body.get("decision", "approved")
    if decision not in ("approved", "rejected"):
        raise InvalidInput("decision: must be approved or rejected")
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
    }


class ApprovalSubmitTokenApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def post(self, request: Request, action_hash: str) -> Response:
        org = sdk_principal(request).org
        body = _submit_body(read_json_body(request, max_bytes=MAX_BODY_BYTES))
        approval = approval_vote(org=org, action_hash=action_hash, **body)
        return Response(approval_view(approval))


class ApprovalAssemblyApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def get(self, request: Request, action_hash: str) -> Response:
        return Response(approval_assembly(org=sdk_principal(request).org, action_hash=action_hash))


class ApproverKeyRegisterApi(KeyScopedSdkApi):
    """POST /v1/orgs/register-approver-pubkey: scope ``approvers:write`` only."""

    permission_classes = [scope_required(Scope.APPROVERS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        key_id = serializers.CharField(required=False, allow_blank=True, max_length=100)
        public_key = serializers.CharField(max_length=100)
        label = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)  # type: ignore[assignment]

    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = approver_key_register(
            org=sdk_principal(request).org,
            public_key=data.validated_data["public_key"],
            key_id=data.validated_data.get("key_id") or None,
            label=data.validated_data["label"],
            via="api",
        )
        return Response(
            {"key_id": key.key_id, "public_key": key.public_key, "label": key.label},
            status=HTTPStatus.CREATED,
        )
