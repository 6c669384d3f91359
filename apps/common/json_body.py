"""Reading JSON request bodies: one set of rules for every route.

Every JSON body goes through ``read_json_bytes`` (transport) and ``apps.common.json_text``
(text and values):

* Content-Type ``application/json`` or any ``*/*+json`` type (parameters such as
  ``charset`` are ignored: JSON is UTF-8); anything else is refused;
* at most ``JSON_BODY_MAX_BYTES`` (default 1 MiB; a route may hold its body to less):
  ``Content-Length`` is checked before anything is read and the bytes read are checked
  again; too large is 413 ``PayloadTooLarge`` in the profile's error body, never Django's
  ``RequestDataTooBig`` page;
* the text rules of ``json_text`` with at most ``JSON_BODY_MAX_DEPTH`` nested
  arrays/objects;
* plain bodies (every route but the receipt bodies) also get the plain-body rules: no
  repeated member name, no U+0000, integers within -2^63 to 2^64-1, other numbers finite.

DRF-parsed routes get them through ``apps.api.parsers.StrictJsonParser``, the only parser
in ``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``; routes that read the raw body (receipts,
approval tokens, the console's vote endpoint) call ``read_json_bytes`` and parse with
``parse_plain_json`` or, where a receipt travels, the verifier's ``parse_json`` (the same
text rules; repeated names and NUL inside a receipt are the decoder's to judge, per receipt).
Refusals go through each profile's one error contract (``apps.api.keyscoped`` /
``apps.api.teampath``): ``ParseError`` and ``InvalidJson`` are key-scoped 422 and
team-path 400 ``invalid_json``, ``PayloadTooLarge`` is 413 on both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from apps.common.errors import InvalidInput, InvalidJson, PayloadTooLarge
from apps.common.json_text import (
    JsonObject,
    JsonTextError,
    JsonValue,
    parse_plain_json,
    plain_value,
)


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json`` or a ``+json`` type, parameters ignored."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (media_type.endswith("+json") and "/" in media_type)


def body_limit(max_bytes: int | None = None) -> int:
    """The byte limit of a body: ``JSON_BODY_MAX_BYTES``, or a route's smaller one."""
    limit: int = settings.JSON_BODY_MAX_BYTES
    return limit if max_bytes is None else min(limit, max_bytes)


def declared_length(meta: Mapping[str, Any]) -> int:
    """The request's ``Content-Length`` (0 when absent or not a number, as Django reads it)."""
    declared = str(meta.get("CONTENT_LENGTH") or "0").strip()
    return int(declared) if declared.isdigit() else 0


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"request body larger than {limit} bytes")


class BodyRequest(Protocol):
    """What reading a body needs of a request: Django's ``HttpRequest`` or DRF's ``Request``."""

    @property
    def content_type(self) -> str | None: ...

    @property
    def META(self) -> Mapping[str, Any]: ...

    @property
    def body(self) -> bytes: ...


def read_json_bytes(request: BodyRequest, *, max_bytes: int | None = None) -> bytes:
    """The raw body of a JSON request: refused unless sent as JSON, refused as too large
    before it is read (``Content-Length``) and after (the bytes read)."""
    content_type: str = request.content_type or ""
    if not is_json_media_type(content_type):
        shown = content_type.split(";", 1)[0].strip() or "none"
        raise InvalidJson(f"expected Content-Type application/json, got {shown}")
    limit = body_limit(max_bytes)
    if declared_length(request.META) > limit:
        raise too_large(limit)
    try:
        body: bytes = request.body
    except RequestDataTooBig:
        raise too_large(limit) from None
    if len(body) > limit:
        raise too_large(limit)
    return body


def parse_json_body(raw: bytes) -> Any:
    """A plain JSON body (not a receipt) as Python values; any refusal is ``InvalidJson``."""
    try:
        return parse_plain_json(raw, max_depth=settings.JSON_BODY_MAX_DEPTH)
    except JsonTextError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from None


def plain_member(name: str, value: JsonValue) -> Any:
    """A member of a raw-read body that is not a receipt (``routingHint``, ``token``...) as
    a plain value, under the plain-body rules; a refusal is ``InvalidInput``."""
    try:
        return plain_value(JsonObject([(name, value)]), "$")[name]
    except JsonTextError as error:
        raise InvalidInput(str(error)) from None
