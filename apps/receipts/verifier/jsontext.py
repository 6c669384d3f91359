"""Strict JSON text parsing that keeps what a plain ``json.loads`` would lose.

The reference decodes received bytes into a typed schema (receipts.md §3); to judge them
the same way we must still see repeated member names and the exact number literals. So
objects come back as ``JsonObject`` (a list of ``(name, value)`` pairs, order and repeats
kept) and numbers as ``JsonNumber`` (the literal text). Everything the reference refuses at
the text level is refused here: invalid UTF-8, a byte-order mark, NaN/Infinity, lone
surrogates, raw control characters, trailing garbage, numbers that overflow a double.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeAlias, cast

_SURROGATE = re.compile("[\ud800-\udfff]")


class DecodeError(ValueError):
    """The input is not a receipt this service can decode. ``str()`` says why."""


class JsonObject(list[tuple[str, Any]]):
    """A JSON object as its member pairs, in order, repeats included."""


class JsonNumber:
    """A JSON number literal, kept as written."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"JsonNumber({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonNumber) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


JsonValue: TypeAlias = "JsonObject | list[JsonValue] | str | JsonNumber | bool | None"


def _refuse_constant(name: str) -> Any:
    raise DecodeError(f"{name} is not a JSON value")


def parse_json(raw: bytes | str) -> JsonValue:
    """Parse JSON text strictly into ``JsonValue`` (see the module docstring)."""
    if isinstance(raw, bytes):
        if raw.startswith(b"\xef\xbb\xbf"):
            raise DecodeError("a byte-order mark is not allowed")
        try:
            # Strict UTF-8 never yields a surrogate: only escapes can smuggle one in.
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DecodeError(f"input is not valid UTF-8: {error.reason}") from None
        may_hold_surrogates = "\\u" in text
    else:
        text = raw
        if text.startswith("\ufeff"):
            raise DecodeError("a byte-order mark is not allowed")
        may_hold_surrogates = "\\u" in text or _SURROGATE.search(text) is not None
    try:
        value: JsonValue = json.loads(
            text,
            object_pairs_hook=JsonObject,
            parse_int=JsonNumber,
            parse_float=JsonNumber,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as error:
        raise DecodeError(f"{error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise DecodeError("nesting too deep") from None
    if may_hold_surrogates:
        _check_surrogates(value)
    return value


def _check_surrogates(value: JsonValue) -> None:
    """Lone surrogates (raw or escaped) are not Unicode text; the reference refuses them."""
    stack: list[JsonValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise DecodeError("lone surrogate in a string")
        elif isinstance(item, JsonObject):
            for name, member in item:
                if _SURROGATE.search(name):
                    raise DecodeError("lone surrogate in a member name")
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(cast(list[JsonValue], item))


def object_members(value: JsonValue) -> list[tuple[str, Any]] | None:
    """The pairs of a parsed JSON object, or None when ``value`` is not an object."""
    return value if isinstance(value, JsonObject) else None
