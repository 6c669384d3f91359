"""Named refusals of the transparency log (transparency.md §5.7)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, NotFound


class CheckpointNotFound(NotFound):
    code = "checkpoint_not_found"


class OrgHeadNotFound(NotFound):
    code = "org_head_not_found"


class ReceiptNotFound(NotFound):
    code = "receipt_not_found"


class TileNotFound(NotFound):
    code = "tile_not_found"


class ProofPending(DomainError):
    """The entry is in no checkpoint yet: ask again after ``retry_after`` seconds."""

    status = HTTPStatus.CONFLICT
    code = "proof_pending"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.seconds = retry_after

    def retry_after(self) -> int | None:
        return self.seconds


class WitnessUnknown(DomainError):
    status = HTTPStatus.FORBIDDEN
    code = "witness_unknown"


class CosignatureInvalid(DomainError):
    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "cosignature_invalid"


class OriginChanged(Exception):
    """TRANSPARENCY_ORIGIN differs from the origin of epoch 1: publication refuses to run."""


class WitnessInvalid(ValueError):
    """A witness registration with a bad name or key."""
