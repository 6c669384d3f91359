"""Strict JSON text: the one parser every JSON request body goes through. Pure Python.

Text rules, for every body: UTF-8 without a byte-order mark; RFC 8259 grammar with nothing
after the value (raw control characters in strings, ``NaN``, ``Infinity`` refused); at most
``max_depth`` nested arrays/objects (the body's own object or array counts as one); no lone
surrogate, raw or escaped.

Two readings of a text that passes them:

* ``parse_json_text`` keeps what a plain ``json.loads`` would lose: objects come back as
  ``JsonObject`` (member pairs in order, repeats included) and numbers as ``JsonNumber``
  (the literal as written). The receipt verifier decodes receipts from this form, so it can
  judge repeated names, U+0000 and number spellings by its own rules (server.md §1).
* ``plain_value`` turns such a value into plain Python values under the rules of every other
  JSON body: no repeated member name, no U+0000 (NUL) in a member name or string (PostgreSQL
  ``text`` cannot hold it), integers within ``INTEGER_MIN`` to ``INTEGER_MAX`` (-2^63 to
  2^64-1, the widest integer any field of this service takes), other numbers finite as an
  IEEE double (``1e999999`` is refused, not read as infinity). ``parse_plain_json`` is both
  steps.

Refusals raise ``JsonTextError`` (a ``ValueError``) whose text says what and where.

The service's JSON entry points, by purpose:

* text from a client: ``parse_json_text`` (exact) and ``parse_plain_json`` (plain values),
  here;
* a request body, on the HTTP floor: ``json_body.read_json_bytes`` (transport),
  ``json_body.parse_json_body`` (a plain body), ``json_body.read_body_members`` (an object
  body whose receipt members are read exactly and the others plainly) and DRF's
  ``apps.api.parsers.StrictJsonParser``;
* a receipt's text, in the verifier: ``apps.receipts.verifier.parse_json`` (the exact
  reading, with the verifier's ``DecodeError``);
* text the service stored itself: ``apps.common.stored_json`` (``stored_value``,
  ``stored_text``).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeAlias, cast

# 128 nested arrays/objects: the default recursion limit of serde_json, which the reference
# SDK decodes receipts with; a receipt's own schema nests 7 deep.
DEFAULT_MAX_DEPTH = 128
INTEGER_MIN = -(2**63)
INTEGER_MAX = 2**64 - 1
# More characters than the longest integer in range ("-9223372036854775808"): refused before
# int() reads it (Python's int() refuses 4,300 digits with an error of its own).
_INTEGER_MAX_CHARS = 20

_SURROGATE = re.compile("[\ud800-\udfff]")
_NUL = "\x00"


class JsonTextError(ValueError):
    """The text is not JSON this service reads. ``str()`` says why and where."""


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
    raise JsonTextError(f"{name} is not a JSON value")


def _too_deep(max_depth: int) -> JsonTextError:
    return JsonTextError(f"nesting deeper than {max_depth} arrays/objects")


def parse_json_text(raw: bytes | str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> JsonValue:
    """Parse JSON text under the text rules (module docstring) into ``JsonValue``."""
    if isinstance(raw, bytes):
        if raw.startswith(b"\xef\xbb\xbf"):
            raise JsonTextError("a byte-order mark is not allowed")
        try:
            # Strict UTF-8 never yields a surrogate: only escapes can smuggle one in.
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise JsonTextError(f"input is not valid UTF-8: {error.reason}") from None
        may_hold_surrogates = "\\u" in text
    else:
        text = raw
        if text.startswith("\ufeff"):
            raise JsonTextError("a byte-order mark is not allowed")
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
        raise JsonTextError(f"{error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        # The C scanner stops at the interpreter's recursion limit, far below what 1 MiB of
        # brackets could nest: refused like any other too-deep text.
        raise _too_deep(max_depth) from None
    # Nesting can be no deeper than the number of brackets: most texts skip the walk.
    if text.count("[") + text.count("{") > max_depth:
        _check_depth(value, max_depth)
    if may_hold_surrogates:
        _check_surrogates(value)
    return value


def _check_depth(value: JsonValue, max_depth: int) -> None:
    """Refuse nesting deeper than ``max_depth``: level by level, holding only the arrays and
    objects (a walk over every value cost a batch of receipts more than twice as much)."""
    level: list[JsonValue] = [value] if isinstance(value, list) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            raise _too_deep(max_depth)
        inner: list[JsonValue] = []
        for item in level:  # JsonObject is a list of pairs
            if isinstance(item, JsonObject):
                inner += [member for _, member in item if isinstance(member, list)]
            else:
                inner += [
                    member for member in cast(list[JsonValue], item) if isinstance(member, list)
                ]
        level = inner


def _check_surrogates(value: JsonValue) -> None:
    """Lone surrogates (raw or escaped) are not Unicode text; the reference refuses them."""
    stack: list[JsonValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise JsonTextError("lone surrogate in a string")
        elif isinstance(item, JsonObject):
            for name, member in item:
                if _SURROGATE.search(name):
                    raise JsonTextError("lone surrogate in a member name")
                stack.append(member)
        elif isinstance(item, list):
            stack.extend(cast(list[JsonValue], item))


def _at(path: str, name: str | int) -> str:
    return f"{path}[{name}]" if isinstance(name, int) else f"{path}.{name}"


def _plain_number(number: JsonNumber, path: str = "$") -> int | float:
    """An integer literal in range as ``int``; any other literal as a finite ``float``."""
    text = number.text
    if "." not in text and "e" not in text and "E" not in text:
        if len(text) > _INTEGER_MAX_CHARS or not INTEGER_MIN <= int(text) <= INTEGER_MAX:
            raise JsonTextError(f"{path}: integer outside [{INTEGER_MIN}, {INTEGER_MAX}]")
        return int(text)
    result = float(text)
    if result in (_INFINITY, -_INFINITY):
        raise JsonTextError(f"{path}: number too large for a double")
    return result


_INFINITY = float("inf")


def plain_value(value: JsonValue, path: str = "$") -> Any:
    """``value`` as plain Python values, under the plain-body rules (module docstring)."""
    if isinstance(value, str):
        if _NUL in value:
            raise JsonTextError(f"{path}: U+0000 (NUL) is not allowed in a string")
        return value
    if isinstance(value, JsonObject):
        members: dict[str, Any] = {}
        for name, member in value:
            if _NUL in name:
                raise JsonTextError(f"{path}: U+0000 (NUL) is not allowed in a member name")
            if name in members:
                raise JsonTextError(f"{_at(path, name)}: repeated member name")
            members[name] = plain_value(member, _at(path, name))
        return members
    if isinstance(value, list):
        items = cast(list[JsonValue], value)
        return [plain_value(item, _at(path, index)) for index, item in enumerate(items)]
    if isinstance(value, JsonNumber):
        return _plain_number(value, path)
    return value


def parse_plain_json(raw: bytes | str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """A JSON body as plain Python values: the text rules, then the plain-body rules."""
    return plain_value(parse_json_text(raw, max_depth=max_depth))
