"""Named refusals of the receipt mirror (see server.md §2, §4, §5)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, NotFound


class ReceiptRejected(DomainError):
    """Re-verification failed after a successful decode (key-scoped 409, team-path 422)."""

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
    status = HTTPStatus.PAYMENT_REQUIRED
    code = "quota_exceeded"
