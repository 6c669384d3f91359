"""Reading request bodies on the SDK plane: size limit and content type, before parsing."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from rest_framework.request import Request

from apps.common.errors import InvalidJson, PayloadTooLarge


def read_json_body(request: Request, *, max_bytes: int) -> bytes:
    """The raw body of a JSON request, refusing oversize bodies before reading them."""
    content_type = request.content_type.split(";", 1)[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise InvalidJson(f"expected Content-Type application/json, got {content_type or 'none'}")
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body larger than {max_bytes} bytes")
    try:
        body: bytes = request.body
    except RequestDataTooBig as error:
        raise PayloadTooLarge(f"request body larger than {max_bytes} bytes") from error
    if len(body) > max_bytes:
        raise PayloadTooLarge(f"request body larger than {max_bytes} bytes")
    return body
