"""Domain errors raised by services, and the two HTTP error contracts.

Services raise small named ``DomainError`` subclasses; each carries its HTTP status, the
team-path status where that profile differs, its team-path error code and any
``Retry-After``, so each profile turns it into its own error body in exactly one place
(``apps.api.keyscoped`` and ``apps.api.teampath``). The team-path catalogue
(docs/teampath-errors.md) is generated from these classes (``manage.py teampath_errors``).
"""

from __future__ import annotations

from http import HTTPStatus

from django.conf import settings


class DomainError(Exception):
    """A refusal the client can act on. Never a 500."""

    status: HTTPStatus = HTTPStatus.CONFLICT
    code: str = "conflict"
    # The team-path status where it differs from ``status`` (the key-scoped one).
    teampath_status: HTTPStatus | None = None
    # The team-path catalogue's row (docs/teampath-errors.md), declared by each refusal that
    # profile answers: when it happens, and on which routes.
    teampath_when: str = ""
    teampath_routes: str = ""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body_extras(self) -> dict[str, object]:
        """Members added to the error body beside the profile's own (e.g. a verdict kind)."""
        return {}

    def retry_after(self) -> int | None:
        """Seconds for a ``Retry-After`` header, where waiting is the remedy."""
        return None


class NotFound(DomainError):
    status = HTTPStatus.NOT_FOUND
    code = "not_found"


class InvalidInput(DomainError):
    """The input has the wrong shape. Key-scoped 422, team-path 400."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    teampath_status = HTTPStatus.BAD_REQUEST
    code = "validation_failed"
    teampath_when = (
        "The body has the wrong shape: a push body that is not a JSON object or has no `content` "
        "object; a receipt that does not decode strictly (server.md §1: unknown member, repeated "
        'member, `null` for an optional member, …: `rejectionReason` `"Malformed: …"`); a '
        'batch body that is not `{"receipts": [...]}` (unknown or repeated member, `receipts` '
        "missing, not an array, empty); U+0000 (NUL) in a receipt outside `action.fields` "
        "(server.md §1: `Malformed`; in a batch, that receipt only) or in any other member "
        "(`routingHint`, `token`); U+0000 in the path (`%00` in an approval id), the query "
        "string or a header; a number out of range (integers beyond -2^63 … 2^64-1, `1e999999`)"
    )
    teampath_routes = "all routes"


class PayloadTooLarge(DomainError):
    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    code = "payload_too_large"
    teampath_when = (
        "The body is larger than `JSON_BODY_MAX_BYTES` (default 1 MiB; a whole batch is held to "
        "it too; `POST /v1/approvals/{id}/token` to 64 KiB). `Content-Length` is checked before "
        "anything is read"
    )
    teampath_routes = "all routes"


class InvalidJson(DomainError):
    """The body is not JSON (or not sent as JSON). Key-scoped 422, team-path 400."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    teampath_status = HTTPStatus.BAD_REQUEST
    code = "invalid_json"
    teampath_when = (
        "The body is not JSON as `apps/common/json_body.py` reads it (bad syntax, `NaN`, a "
        "byte-order mark, invalid UTF-8, a lone surrogate, empty, nesting deeper than "
        "`JSON_BODY_MAX_DEPTH` (128) arrays/objects), or not sent as `Content-Type: "
        "application/json` (or another `+json` type)"
    )
    teampath_routes = "all POST routes"


class Forbidden(DomainError):
    status = HTTPStatus.FORBIDDEN
    code = "forbidden"


class ServiceUnavailable(DomainError):
    """The service is briefly at capacity (database unreachable or slow, too many requests
    in flight). Always answered with a short ``Retry-After``; never a 500."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    code = "over_capacity"
    teampath_when = (
        "The service is briefly at capacity (database unreachable or slow, too many requests in "
        "flight). `Retry-After` = `RETRY_AFTER_SECONDS` (default 2)"
    )
    teampath_routes = "all"

    def retry_after(self) -> int | None:
        return int(settings.RETRY_AFTER_SECONDS)
