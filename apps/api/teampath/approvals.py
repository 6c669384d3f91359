"""Team-path approval routes, keyed by approval id; thin views over ``apps.approvals.services``.

* ``POST /v1/approvals`` ``{receipt, routingHint?}`` → ``OpenApprovalResult``
  ``{approvalId, token?, expiresAt}``: the receipt must verify and be suspended (an L0 action
  the policy routed to a human, or a ``suspended`` lifecycle receipt). Opening is idempotent
  per action: the same receipt again answers 200 with the same id (and no token: the
  one-time approver token is shown once, only its digest is stored).
* ``GET /v1/approvals/{approvalId}`` → ``PollApprovalResult {outcome, approval?}``.
* ``POST /v1/approvals/{approvalId}/token`` ``{token}`` → the ``Approval`` record, after
  ``approval_vote_with_token`` (the one vote path of both profiles and the console)
  verified the approver's signed token (approvals.md §3) against the suspended content
  stored when the approval opened.

Another team's approval id answers exactly like an unknown one (404 approval_not_found).
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from http import HTTPStatus
from typing import Any

import orjson
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.openapi import ok, path_parameter, teampath_error, teampath_errors
from apps.api.permissions import scope_required, sdk_principal
from apps.api.serializers import (
    BaseOutputSerializer,
    HashField,
    ReceiptField,
    Rfc3339Field,
    StrictCharField,
)
from apps.api.teampath.base import TeamPathApi
from apps.approvals.content import is_suspended
from apps.approvals.errors import ReceiptNotSuspended
from apps.approvals.models import Approval, VoteDecision
from apps.approvals.selectors import (
    TEAMPATH_OUTCOMES,
    approval_get_by_id,
    approval_with_votes,
)
from apps.approvals.services import (
    approval_open_with_access_token,
    approval_vote_with_token,
    receipt_verify,
)
from apps.common.json_body import read_body_members
from apps.tenancy.models import Scope

ROUTING_HINT_MAX_CHARS = 200


class ApprovalVoteSerializer(serializers.Serializer[Any]):
    approverPublicKey = serializers.CharField(source="approver_public_key")  # wire: camelCase
    decision = serializers.ChoiceField(VoteDecision.values)
    votedAt = Rfc3339Field(source="voted_at")

    class Meta:
        ref_name = "ApprovalVote"


class ApprovalRecordSerializer(serializers.Serializer[Any]):
    """The ``Approval`` record: the decision, the approver whose vote settled it, who voted
    how and when."""

    # Its instance is an approval as of a moment (``context["now"]``, else now) whose
    # counted votes a selector read once (``approval_with_votes``): the outcome, the
    # deciding approver and the vote list all come from that one read.

    approvalId = serializers.CharField(source="approval_id")
    actionHash = HashField(source="action_hash", help_text="The suspended receipt's action_hash.")
    receiptId = HashField(source="action_hash", help_text="The same as `actionHash`.")
    decision = serializers.SerializerMethodField()
    approverPublicKey = serializers.SerializerMethodField(
        help_text="The key whose vote settled it; null while pending or expired."
    )
    outcome = serializers.SerializerMethodField()
    threshold = serializers.IntegerField(min_value=1)
    approvedCount = serializers.IntegerField(source="approved_count", min_value=0)
    routingHint = serializers.SerializerMethodField()
    createdAt = Rfc3339Field(source="created_at")
    expiresAt = Rfc3339Field(source="expires_at", allow_null=True)
    decidedAt = Rfc3339Field(source="resolved_at", allow_null=True)
    votes = serializers.SerializerMethodField()
    decidedLocally = serializers.SerializerMethodField(
        help_text="The kind of the agent's own unsigned lifecycle link that closed it "
        "(outcome `rejected`: no human decision is recorded); null otherwise."
    )

    class Meta:
        ref_name = "Approval"

    def _now(self) -> datetime:
        now: datetime | None = self.context.get("now")
        if now is None:
            now = self.context["now"] = timezone.now()
        return now

    @extend_schema_field(
        {
            "type": "string",
            "nullable": True,
            "enum": ["approved", "rejected", "expired", None],
            "description": "The settled decision; null while pending.",
        }
    )
    def get_decision(self, approval: Approval) -> str | None:
        return approval.decision_at(self._now())

    @extend_schema_field({"type": "string", "nullable": True})
    def get_approverPublicKey(self, approval: Approval) -> str | None:
        return approval.deciding_approver_at(self._now())

    @extend_schema_field({"type": "string", "enum": TEAMPATH_OUTCOMES})
    def get_outcome(self, approval: Approval) -> str:
        return approval.outcome_at(self._now())

    @extend_schema_field({"type": "string", "nullable": True, "enum": [
        "approved", "denied", "expired", "completed", None]})  # fmt: skip
    def get_decidedLocally(self, approval: Approval) -> str | None:
        return approval.local_decision or None

    @extend_schema_field({"type": "string", "nullable": True})
    def get_routingHint(self, approval: Approval) -> str | None:
        return approval.routing_hint or None

    @extend_schema_field(ApprovalVoteSerializer(many=True))
    def get_votes(self, approval: Approval) -> list[dict[str, Any]]:
        return list(ApprovalVoteSerializer(approval.counted_vote_list(), many=True).data)


APPROVAL_ID_PARAMETER = path_parameter("approval_id", "The id returned on opening.")


class ApprovalOpenApi(TeamPathApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        refuses_unknown_members = True  # raw_body_members(allowed=...); a closed object

        receipt = ReceiptField(error_messages={"required": "this member is required"})
        routingHint = StrictCharField(
            source="routing_hint",
            required=False,
            allow_blank=True,
            trim_whitespace=False,
            default="",
            max_length=ROUTING_HINT_MAX_CHARS,
            error_messages={
                key: f"a string of at most {ROUTING_HINT_MAX_CHARS} chars"
                for key in ("invalid", "null", "max_length")
            },
        )

        class Meta:
            ref_name = "OpenApprovalRequest"

    class OutputSerializer(BaseOutputSerializer):
        omit_when_empty = ("token",)

        approvalId = serializers.CharField(source="approval_id")
        token = serializers.CharField(
            required=False, help_text="One-time approver token; only in the 201 answer."
        )
        expiresAt = Rfc3339Field(source="expires_at")

        class Meta:
            ref_name = "OpenApprovalResult"

    @extend_schema(
        operation_id="approval_open",
        summary="Open an approval for a suspended receipt (scope approvals:write)",
        tags=["approvals"],
        request=InputSerializer,
        responses={
            201: ok(OutputSerializer, "Opened; the one-time approver `token` is shown once."),
            200: ok(OutputSerializer, "Opened before for this action: the same id, no token."),
            **teampath_errors(
                body=True,
                s422=teampath_error(
                    ["receipt_rejected", "receipt_not_suspended", "validation_failed"],
                    "The receipt fails re-verification, does not wait for a human, or the active "
                    "approver keys cannot meet the threshold",
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        org = sdk_principal(request).org
        members = read_body_members(
            request,
            shape="{receipt, routingHint?}",
            raw=["receipt"],
            allowed=["receipt", "routingHint"],
        )
        data = self.InputSerializer(data=members)
        data.is_valid(raise_exception=True)
        item = receipt_verify(data.validated_data["receipt"], org=org, count_refusal=False)
        content: dict[str, Any] = orjson.loads(item.receipt.stored_text)["content"]
        if not is_suspended(content):
            raise ReceiptNotSuspended(
                "the receipt is not suspended: its policy decision does not require approval"
            )
        result = approval_open_with_access_token(
            org=org,
            content=content,
            routing_hint=data.validated_data["routing_hint"],
            operator_keys=[key for key in [item.receipt.operator_public_key] if key],
        )
        approval = result.opened.approval
        answer = {
            "approval_id": approval.approval_id,
            "token": result.token,
            "expires_at": approval.expires_at,
        }
        created = result.opened.created
        return Response(
            self.OutputSerializer(answer).data,
            status=HTTPStatus.CREATED if created else HTTPStatus.OK,
        )


class ApprovalPollApi(TeamPathApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class OutputSerializer(BaseOutputSerializer):
        omit_when_empty = ("approval",)

        outcome = serializers.ChoiceField([(value, value) for value in TEAMPATH_OUTCOMES])
        approval = ApprovalRecordSerializer(required=False, help_text="Present once settled.")

        class Meta:
            ref_name = "PollApprovalResult"

    @extend_schema(
        operation_id="approval_poll",
        summary="Poll an approval's outcome (scope approvals:write)",
        tags=["approvals"],
        parameters=[APPROVAL_ID_PARAMETER],
        responses={
            200: ok(OutputSerializer, "`approval` is present once settled."),
            **teampath_errors(
                s404=teampath_error(["approval_not_found", "not_found"], "No such approval here")
            ),
        },
    )
    def get(self, request: Request, approval_id: str) -> Response:
        now = timezone.now()
        approval = approval_with_votes(
            approval_get_by_id(org=sdk_principal(request).org, approval_id=approval_id)
        )
        settled = approval.decision_at(now) is not None
        poll = {"outcome": approval.outcome_at(now), "approval": approval if settled else None}
        return Response(self.OutputSerializer(poll, context={"now": now}).data)


class ApprovalTokenSubmitApi(TeamPathApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    class InputSerializer(serializers.Serializer[Any]):
        refuses_unknown_members = True  # raw_body_members(allowed=...); a closed object

        token = StrictCharField(
            help_text="The approver's signed approval token, base64 (approvals.md §3).",
            error_messages={
                key: "required, the approver's signed token in base64"
                for key in ("required", "invalid", "null", "blank")
            },
        )

        class Meta:
            ref_name = "TokenSubmitRequest"

        def validate_token(self, token: str) -> bytes:
            try:
                return base64.b64decode(token, validate=True)
            except (binascii.Error, ValueError):
                raise serializers.ValidationError("not valid base64") from None

    @extend_schema(
        operation_id="approval_token",
        summary="Settle an approval with the approver's signed token (scope approvals:write)",
        tags=["approvals"],
        parameters=[APPROVAL_ID_PARAMETER],
        request=InputSerializer,
        responses={
            200: ok(ApprovalRecordSerializer, "The approval record after the vote."),
            **teampath_errors(
                body=True,
                s403=teampath_error(
                    ["forbidden", "token_rejected"],
                    "The key lacks the scope, or the token is refused (also when its key "
                    "produced the receipt: nobody approves their own action)",
                ),
                s404=teampath_error(["approval_not_found", "not_found"], "No such approval here"),
                s409=teampath_error(
                    [
                        "approval_settled",
                        "duplicate_vote",
                        "content_mismatch",
                        "roster_too_small",
                    ],
                    "Already settled, a second vote by the same key, no suspended content, or "
                    "fewer eligible approver keys than the threshold",
                ),
                s410=teampath_error(["approval_expired"], "After `expiresAt`"),
                s422=teampath_error(["leg_rejected", "validation_failed"], "A refused leg"),
            ),
        },
    )
    def post(self, request: Request, approval_id: str) -> Response:
        org = sdk_principal(request).org
        members = read_body_members(
            request, shape="{token}", allowed=["token"], max_bytes=64 * 1024
        )
        data = self.InputSerializer(data=members)
        data.is_valid(raise_exception=True)
        approval = approval_get_by_id(org=org, approval_id=approval_id)
        settled = approval_vote_with_token(approval=approval, token=data.validated_data["token"])
        return Response(ApprovalRecordSerializer(approval_with_votes(settled)).data)
