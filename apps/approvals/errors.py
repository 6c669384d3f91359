"""Named refusals of approvals (server.md §6, approvals.md §3.1)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, NotFound


class ApprovalNotFound(NotFound):
    code = "approval_not_found"
    teampath_when = (
        "No approval with that id in the key's team (another team's approval looks the same)"
    )
    teampath_routes = "approvals routes"


class ApprovalContentMismatch(DomainError):
    """``action_content`` does not hash to the approval's ``action_hash`` (409)."""

    code = "content_mismatch"
    teampath_when = "The approval holds no suspended content to check the token against"
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"


class SuspendedReceiptNotPushed(ApprovalContentMismatch):
    """The approval was opened by the suspend ticket and its receipt is not mirrored yet,
    so there is no content to verify a vote against (409)."""

    code = "suspended_receipt_not_pushed"


class AmbiguousTicket(DomainError):
    """A suspend ticket names two suspended contents of the org (409): never guess."""

    code = "ambiguous_ticket"


class TokenRejected(DomainError):
    """The approval token failed verification (403 with the reason)."""

    status = HTTPStatus.FORBIDDEN
    code = "token_rejected"
    teampath_when = (
        "The approver's token does not verify (malformed, unregistered or ineligible key, bad "
        "signature, expired, replayed nonce, other scope or content), or its key produced the "
        "suspended receipt (nobody approves their own action)"
    )
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"


class SelfApproval(TokenRejected):
    """A token or leg signed by a producer key of the suspended receipt (403)."""


class LegRefused(DomainError):
    """A submitted co-signed leg does not verify (422: the token itself was fine)."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "leg_rejected"
    teampath_when = (
        "A co-signed leg sent with the token does not verify (the token itself was fine)"
    )
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"


class DuplicateVote(DomainError):
    code = "duplicate_vote"
    teampath_when = "The same approver key voted on this approval already"
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"


class ApprovalSettled(DomainError):
    code = "approval_settled"
    teampath_when = "A token for an approval already approved or rejected (before its expiry)"
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"


class ApprovalExpired(DomainError):
    """A vote after the signed expiry: 409 key-scoped, 410 team-path (server.md §6)."""

    code = "approval_expired"
    teampath_when = "A token after the approval's `expiresAt` (unless it was settled before)"
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"
    teampath_status = HTTPStatus.GONE


class AssemblyNotReady(DomainError):
    code = "not_yet_approved"


class RosterTooSmall(DomainError):
    """The first vote finds fewer eligible approver keys than the threshold (409)."""

    code = "roster_too_small"
    teampath_when = (
        "The first vote finds fewer eligible approver keys (the team's active keys, narrowed to "
        "the receipt's signed `approver_pubkeys` when that list is non-empty) than the "
        "threshold; the roster freezes at the first counted vote"
    )
    teampath_routes = "`POST /v1/approvals/{approvalId}/token`"


class ApproverKeyRefused(DomainError):
    code = "approver_key_refused"


class ReceiptNotSuspended(DomainError):
    """The receipt verifies but does not wait for a human: nothing to approve."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "receipt_not_suspended"
    teampath_when = (
        "The receipt verifies but is not waiting for a human (not an L0 action whose "
        "`decision_path` is `require_approval`, nor a `suspended` lifecycle receipt)"
    )
    teampath_routes = "`POST /v1/approvals`"
