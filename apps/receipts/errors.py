"""Named refusals of the receipt mirror (see server.md §2, §4, §5)."""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus

from django.utils import timezone

from apps.common.errors import DomainError, InvalidInput, NotFound


class ReceiptRejected(DomainError):
    """Re-verification failed after a successful decode (key-scoped 409, team-path 422)."""

    teampath_status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "receipt_rejected"

    def __init__(self, kind: str, detail: str | None, *, action_hash: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail
        # The action hash the receipt names (for the receipt.refused event), where known.
        self.action_hash = action_hash

    def body_extras(self) -> dict[str, object]:
        return {"kind": self.kind}


class ReceiptMalformed(DomainError):
    """The receipt does not decode (key-scoped 422, team-path 400)."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    teampath_status = HTTPStatus.BAD_REQUEST
    code = "validation_failed"

    def body_extras(self) -> dict[str, object]:
        return {"kind": "Malformed"}


class SupersedeTargetNotFound(NotFound):
    code = "supersede_target_not_found"


class SupersedeRefused(DomainError):
    code = "supersede_refused"


class ChainConstraint(DomainError):
    code = "chain_constraint"


class QuotaExceeded(DomainError):
    """The org's monthly receipt quota is used up (key-scoped 402, team-path 429); it
    resets at the first instant of the next month, UTC, which ``Retry-After`` counts to."""

    status = HTTPStatus.PAYMENT_REQUIRED
    teampath_status = HTTPStatus.TOO_MANY_REQUESTS
    code = "quota_exceeded"

    def retry_after(self) -> int | None:
        return seconds_until_next_month(timezone.now())


def seconds_until_next_month(now: datetime) -> int:
    """Whole seconds from ``now`` to the first instant of the next calendar month, UTC."""
    now = now.astimezone(UTC)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    start = datetime(year, month, 1, tzinfo=UTC)
    return max(1, int((start - now).total_seconds() + 0.999999))


class BatchTooLarge(InvalidInput):
    """More receipts in one team-path batch than the route takes (400 in both profiles)."""

    status = HTTPStatus.BAD_REQUEST
    code = "batch_too_large"
