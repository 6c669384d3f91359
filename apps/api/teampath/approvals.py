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
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import orjson
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.teampath.base import TeamPathApi, parse_body
from apps.approvals.content import is_suspended
from apps.approvals.errors import ReceiptNotSuspended
from apps.approvals.models import Approval, ApprovalStatus
from apps.approvals.selectors import approval_get_by_id
from apps.approvals.services import (
    approval_open_with_access_token,
    approval_vote_with_token,
    receipt_verify,
)
from apps.common.errors import InvalidInput
from apps.common.json_body import plain_member, read_json_bytes
from apps.common.openapi import (
    json_body,
    ok,
    path_parameter,
    teampath_error,
    teampath_errors,
)
from apps.receipts.verifier import JsonValue, object_members
from apps.tenancy.models import Scope
from apps.tenancy.permissions import scope_required, sdk_principal

ROUTING_HINT_MAX_CHARS = 200


def _rfc3339(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _members(value: JsonValue, allowed: set[str], shape: str) -> dict[str, Any]:
    """A body object's members: no repeats, nothing unknown; every member but ``receipt``
    held to the plain-body rules (``routingHint`` with a NUL is ``validation_failed``)."""
    members = object_members(value)
    if members is None:
        raise InvalidInput(f"the body must be a JSON object {shape}")
    names = [name for name, _ in members]
    if len(names) != len(set(names)):
        raise InvalidInput("the body repeats a member name")
    unknown = sorted(set(names) - allowed)
    if unknown:
        raise InvalidInput(f"unknown member(s): {', '.join(unknown)}")
    return {
        name: member if name == "receipt" else plain_member(name, member)
        for name, member in members
    }


def approval_outcome(approval: Approval) -> str:
    """``ApprovalOutcome``: the status, except that an approval nobody decided is
    ``expired`` once past ``expiresAt`` (whatever its ``on_timeout``: server.md §6)."""
    decided = approval.status in (ApprovalStatus.APPROVED, ApprovalStatus.REJECTED) and (
        approval.votes.exists()
    )
    if decided:
        return approval.status
    if approval.expires_at is not None and timezone.now() > approval.expires_at:
        return ApprovalStatus.EXPIRED.value
    return approval.status


def approval_record(approval: Approval) -> dict[str, Any]:
    """The ``Approval`` record: the decision, the approver whose vote settled it, who voted
    how and when."""
    outcome = approval_outcome(approval)
    votes = list(approval.votes.all())
    deciding = votes[-1] if votes and outcome != ApprovalStatus.PENDING else None
    return {
        "approvalId": approval.approval_id,
        "actionHash": approval.action_hash,
        "receiptId": approval.action_hash,
        "decision": None if outcome == ApprovalStatus.PENDING else outcome,
        "approverPublicKey": (
            deciding.approver_public_key
            if deciding is not None and outcome != ApprovalStatus.EXPIRED
            else None
        ),
        "outcome": outcome,
        "threshold": approval.threshold,
        "approvedCount": approval.approved_count,
        "routingHint": approval.routing_hint or None,
        "createdAt": _rfc3339(approval.created_at),
        "expiresAt": _rfc3339(approval.expires_at),
        "decidedAt": _rfc3339(approval.resolved_at),
        "votes": [
            {
                "approverPublicKey": vote.approver_public_key,
                "decision": vote.decision,
                "votedAt": _rfc3339(vote.voted_at),
            }
            for vote in votes
        ],
    }


APPROVAL_ID_PARAMETER = path_parameter("approval_id", "The id returned on opening.")


@extend_schema_view(
    post=extend_schema(
        operation_id="approval_open",
        summary="Open an approval for a suspended receipt (scope approvals:write)",
        tags=["approvals"],
        request=json_body("OpenApprovalRequest"),
        responses={
            201: ok("OpenApprovalResult", "Opened; the one-time approver `token` is shown once."),
            200: ok("OpenApprovalResult", "Opened before for this action: the same id, no token."),
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
)
class ApprovalOpenApi(TeamPathApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def post(self, request: Request) -> Response:
        org = sdk_principal(request).org
        body = read_json_bytes(request)
        members = _members(parse_body(body), {"receipt", "routingHint"}, "{receipt, routingHint?}")
        if "receipt" not in members:
            raise InvalidInput("receipt: this member is required")
        hint = members.get("routingHint", "")
        if not isinstance(hint, str) or len(hint) > ROUTING_HINT_MAX_CHARS:
            raise InvalidInput(f"routingHint: a string of at most {ROUTING_HINT_MAX_CHARS} chars")
        item = receipt_verify(members["receipt"], org=org, count_refusal=False)
        content: dict[str, Any] = orjson.loads(item.receipt.stored_text)["content"]
        if not is_suspended(content):
            raise ReceiptNotSuspended(
                "the receipt is not suspended: its policy decision does not require approval"
            )
        result = approval_open_with_access_token(
            org=org,
            content=content,
            routing_hint=hint,
            operator_keys=[key for key in [item.receipt.operator_public_key] if key],
        )
        approval = result.opened.approval
        answer: dict[str, Any] = {"approvalId": approval.approval_id}
        if result.token is not None:
            answer["token"] = result.token
        answer["expiresAt"] = _rfc3339(approval.expires_at)
        created = result.opened.created
        return Response(answer, status=HTTPStatus.CREATED if created else HTTPStatus.OK)


@extend_schema_view(
    get=extend_schema(
        operation_id="approval_poll",
        summary="Poll an approval's outcome (scope approvals:write)",
        tags=["approvals"],
        parameters=[APPROVAL_ID_PARAMETER],
        responses={
            200: ok("PollApprovalResult", "`approval` is present once settled."),
            **teampath_errors(
                s404=teampath_error(["approval_not_found", "not_found"], "No such approval here")
            ),
        },
    )
)
class ApprovalPollApi(TeamPathApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def get(self, request: Request, approval_id: str) -> Response:
        approval = approval_get_by_id(org=sdk_principal(request).org, approval_id=approval_id)
        outcome = approval_outcome(approval)
        result: dict[str, Any] = {"outcome": outcome}
        if outcome != ApprovalStatus.PENDING:
            result["approval"] = approval_record(approval)
        return Response(result)


def _token_bytes(value: JsonValue) -> bytes:
    members = _members(value, {"token"}, "{token}")
    token = members.get("token")
    if not isinstance(token, str) or not token:
        raise InvalidInput("token: required, the approver's signed token in base64")
    try:
        return base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("token: not valid base64") from None


@extend_schema_view(
    post=extend_schema(
        operation_id="approval_token",
        summary="Settle an approval with the approver's signed token (scope approvals:write)",
        tags=["approvals"],
        parameters=[APPROVAL_ID_PARAMETER],
        request=json_body("TokenSubmitRequest"),
        responses={
            200: ok("Approval", "The approval record after the vote."),
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
)
class ApprovalTokenSubmitApi(TeamPathApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE)]

    def post(self, request: Request, approval_id: str) -> Response:
        org = sdk_principal(request).org
        token = _token_bytes(parse_body(read_json_bytes(request, max_bytes=64 * 1024)))
        approval = approval_get_by_id(org=org, approval_id=approval_id)
        settled = approval_vote_with_token(approval=approval, token=token)
        return Response(approval_record(settled))
