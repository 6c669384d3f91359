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
in ``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``; routes that read the raw body call, by
what it holds: ``read_body_members`` for an object whose members carry a receipt or a token
(the key-scoped push, approval opening and votes: one exact reading, the receipt members
handed on as parsed, the others held to the plain-body rules), ``read_json_bytes`` and the
verifier's ``parse_json`` where the body is the receipt or a batch of them (repeated names
and NUL inside a receipt are the decoder's to judge, per receipt), and ``read_json_bytes``
with ``parse_json_body`` for a plain body (the console's vote endpoint).
Refusals go through each profile's one error contract (``apps.api.keyscoped`` /
``apps.api.teampath``): ``ParseError`` and ``InvalidJson`` are key-scoped 422 and
team-path 400 ``invalid_json``, ``PayloadTooLarge`` is 413 on both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from apps.common.errors import InvalidInput, InvalidJson, PayloadTooLarge
from apps.common.json_text import (
    JsonObject,
    JsonTextError,
    parse_json_text,
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


def raw_body_members(
    body: bytes, *, shape: str = "", raw: Iterable[str] = (), allowed: Iterable[str] | None = None
) -> dict[str, Any]:
    """The members of a raw-read JSON object body, for an input serializer.

    Parsed once in the exact reading (``parse_json_text``, as the receipt decoder reads
    it): the members named in ``raw`` (a receipt, its content) are handed on exactly as
    parsed, every other member is held to the plain-body rules (``routingHint``,
    ``token``...; a refusal is ``InvalidInput``); a repeated name, and with ``allowed`` an
    unknown one, is refused.
    """
    try:
        parsed = parse_json_text(body, max_depth=settings.JSON_BODY_MAX_DEPTH)
    except JsonTextError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from None
    if not isinstance(parsed, JsonObject):
        raise InvalidInput(f"the body must be a JSON object {shape}".rstrip())
    names = [name for name, _ in parsed]
    if len(names) != len(set(names)):
        raise InvalidInput("the body repeats a member name")
    if allowed is not None:
        unknown = sorted(set(names) - set(allowed))
        if unknown:
            raise InvalidInput(f"unknown member(s): {', '.join(unknown)}")
    kept = set(raw)
    try:
        plain = plain_value(JsonObject([pair for pair in parsed if pair[0] not in kept]))
    except JsonTextError as error:
        raise InvalidInput(str(error)) from None
    return {name: value if name in kept else plain[name] for name, value in parsed}


def read_body_members(
    request: BodyRequest,
    *,
    shape: str = "",
    raw: Iterable[str] = (),
    allowed: Iterable[str] | None = None,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """The members of a JSON object request body (``read_json_bytes``, then
    ``raw_body_members``): what a raw-read route hands its input serializer."""
    body = read_json_bytes(request, max_bytes=max_bytes)
    return raw_body_members(body, shape=shape, raw=raw, allowed=allowed)
