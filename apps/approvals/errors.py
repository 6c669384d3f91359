"""Named refusals of approvals (server.md §6, approvals.md §3.1)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, InvalidInput, NotFound


class ApprovalNotFound(NotFound):
    code = "approval_not_found"


class ApprovalContentMismatch(DomainError):
    """``action_content`` does not hash to the approval's ``action_hash`` (409)."""

    code = "content_mismatch"


class TokenRejected(DomainError):
    """The approval token failed verification (403 with the reason)."""

    status = HTTPStatus.FORBIDDEN
    code = "token_rejected"


class LegRefused(DomainError):
    """A submitted co-signed leg does not verify (422: the token itself was fine)."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "leg_rejected"


class DuplicateVote(DomainError):
    code = "duplicate_vote"


class ApprovalSettled(DomainError):
    code = "approval_settled"


class ApprovalExpired(DomainError):
    status = HTTPStatus.GONE
    code = "approval_expired"


class AssemblyNotReady(DomainError):
    code = "not_yet_approved"


class RosterTooSmall(InvalidInput):
    code = "validation_failed"


class ApproverKeyRefused(DomainError):
    code = "approver_key_refused"
