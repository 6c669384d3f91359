"""Named refusals of the transparency log (transparency.md §5.7)."""

from __future__ import annotations

from http import HTTPStatus

from apps.common.errors import DomainError, NotFound


class CheckpointNotFound(NotFound):
    code = "checkpoint_not_found"
    teampath_when = (
        "No checkpoint published yet (`GET /v1/log/checkpoint`), or no checkpoint of the "
        "submitted size (`POST /v1/log/cosignatures`)"
    )
    teampath_routes = "transparency log routes"


class OrgHeadNotFound(NotFound):
    code = "org_head_not_found"
    teampath_when = "Unknown `org_id`, or a size that is not one of its published heads"
    teampath_routes = "`GET /v1/log/orgs/{org_id}/consistency`"


class ReceiptNotFound(NotFound):
    code = "receipt_not_found"
    teampath_when = (
        "No mirrored receipt with that id in the key's team (another team's looks the same)"
    )
    teampath_routes = "`GET /v1/receipts/{receiptId}/proof`"


class TileNotFound(NotFound):
    code = "tile_not_found"
    teampath_when = "A non-canonical tile path, or a tile the latest checkpoint does not cover"
    teampath_routes = "`GET /v1/log/tile/…`"


class ProofPending(DomainError):
    """The entry is in no checkpoint yet: ask again after ``retry_after`` seconds."""

    status = HTTPStatus.CONFLICT
    code = "proof_pending"
    teampath_when = (
        "The receipt is in no checkpoint yet; `Retry-After` says when the next epoch is due "
        "(60 when periodic publication is off)"
    )
    teampath_routes = "`GET /v1/receipts/{receiptId}/proof`"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.seconds = retry_after

    def retry_after(self) -> int | None:
        return self.seconds


class WitnessUnknown(DomainError):
    status = HTTPStatus.FORBIDDEN
    code = "witness_unknown"
    teampath_when = "No active registered witness with the line's name and key ID"
    teampath_routes = "`POST /v1/log/cosignatures`"


class CosignatureInvalid(DomainError):
    status = HTTPStatus.UNPROCESSABLE_ENTITY
    code = "cosignature_invalid"
    teampath_when = (
        "The line is not a cosignature/v1 line, its time is over 300 s ahead, or it does not "
        "verify over the stored checkpoint body"
    )
    teampath_routes = "`POST /v1/log/cosignatures`"


class OriginChanged(Exception):
    """TRANSPARENCY_ORIGIN differs from the origin of epoch 1: publication refuses to run."""


class WitnessInvalid(ValueError):
    """A witness registration with a bad name or key."""
