"""Named refusals of approvals (server.md §6, approvals.md §3.1)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, NotFound


class ApprovalNotFound(NotFound):
    code = "approval_not_found"


class ApprovalContentMismatch(DomainError):
    """``action_content`` does not hash to the approval's ``action_hash`` (409)."""

    code = "content_mismatch"


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


class SelfApproval(TokenRejected):
    """A token or leg signed by a producer key of the suspended receipt (403)."""


class LegRefused(DomainError):
    """A submitted co-signed leg does not verify (422: the token itself was fine)."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "leg_rejected"


class DuplicateVote(DomainError):
    code = "duplicate_vote"


class ApprovalSettled(DomainError):
    code = "approval_settled"


class ApprovalExpired(DomainError):
    """A vote after the signed expiry: 409 key-scoped, 410 team-path (server.md §6)."""

    code = "approval_expired"
    teampath_status = HTTPStatus.GONE


class AssemblyNotReady(DomainError):
    code = "not_yet_approved"


class RosterTooSmall(DomainError):
    """The first vote finds fewer eligible approver keys than the threshold (409)."""

    code = "roster_too_small"


class ApproverKeyRefused(DomainError):
    code = "approver_key_refused"


class ReceiptNotSuspended(DomainError):
    """The receipt verifies but does not wait for a human: nothing to approve."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "receipt_not_suspended"
