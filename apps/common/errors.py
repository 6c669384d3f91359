"""Domain errors raised by services, and the two HTTP error contracts.

Services raise small named ``DomainError`` subclasses; each carries its HTTP status, the
team-path status where that profile differs, its team-path error code and any
``Retry-After``, so each profile turns it into its own error body in exactly one place
(``apps.api.keyscoped`` and ``apps.api.teampath``). What each refusal means to a team-path
client (docs/teampath-errors.md) is the API floor's to say (``apps.api.catalogue``).
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


class PayloadTooLarge(DomainError):
    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    code = "payload_too_large"


class InvalidJson(DomainError):
    """The body is not JSON (or not sent as JSON). Key-scoped 422, team-path 400."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    teampath_status = HTTPStatus.BAD_REQUEST
    code = "invalid_json"


class Forbidden(DomainError):
    status = HTTPStatus.FORBIDDEN
    code = "forbidden"


class ServiceUnavailable(DomainError):
    """The service is briefly at capacity (database unreachable or slow, too many requests
    in flight). Always answered with a short ``Retry-After``; never a 500."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    code = "over_capacity"

    def retry_after(self) -> int | None:
        return int(settings.RETRY_AFTER_SECONDS)
