"""A receipt's JSON text, read the way the verifier judges it.

The reference decodes received bytes into a typed schema (receipts.md §3); to judge them
the same way we must still see repeated member names and the exact number literals. So
the text is read by the service's one strict parser (``apps.common.json_text``, pure Python
like this package) in its exact form: objects come back as ``JsonObject`` (a list of
``(name, value)`` pairs, order and repeats kept) and numbers as ``JsonNumber`` (the literal
text). Everything the reference refuses at the text level is refused there: invalid UTF-8,
a byte-order mark, NaN/Infinity, lone surrogates, raw control characters, trailing
garbage, nesting deeper than the reference's decoder allows; numbers that overflow a double
are refused by the schema decoder. This module gives those refusals the verifier's
``DecodeError``.
"""

from __future__ import annotations

from typing import Any

from apps.common.json_text import (
    DEFAULT_MAX_DEPTH,
    JsonNumber,
    JsonObject,
    JsonTextError,
    JsonValue,
    parse_json_text,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DecodeError",
    "JsonNumber",
    "JsonObject",
    "JsonValue",
    "object_members",
    "parse_json",
]


class DecodeError(ValueError):
    """The input is not a receipt this service can decode. ``str()`` says why."""


def parse_json(raw: bytes | str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> JsonValue:
    """Parse JSON text strictly into ``JsonValue`` (see the module docstring)."""
    try:
        return parse_json_text(raw, max_depth=max_depth)
    except JsonTextError as error:
        raise DecodeError(str(error)) from None


def object_members(value: JsonValue) -> list[tuple[str, Any]] | None:
    """The pairs of a parsed JSON object, or None when ``value`` is not an object."""
    return value if isinstance(value, JsonObject) else None
