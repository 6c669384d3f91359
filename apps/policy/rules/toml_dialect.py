"""Reading policy TOML exactly as the SDK does (policy.md §3, server.md §7).

The SDK's parser speaks TOML 1.1 and enforces a few limits of its own. ``tomli`` (2.3 or
newer) speaks TOML 1.1 too, which covers multi-line inline tables, ``\\e`` / ``\\xHH`` escapes
and times without seconds. What is left is done here, in one left-to-right pass over the
text before ``tomli`` sees it (the "shim" of §3):

* one leading byte-order mark is dropped (the hash still covers it: see ``identity``);
* in date/time values a seconds field of ``60`` reads as ``59`` and a year ``0000`` as
  ``2000`` (also a leap year), because Python's datetime cannot hold either;
* inside an inline table, a line break or comment between a complete key and ``=``, or right
  after ``=``, becomes a space: the SDK allows those, TOML 1.1 (and ``tomli``) do not;
* a value may nest at most 80 arrays / inline tables, and a key or table header may have at
  most 80 dotted parts.

After ``tomli`` has parsed the text, two more limits apply: a float literal that overflows
to infinity is refused, and every integer must lie in -2**127 .. 2**128-1.

When the pass meets something it does not expect, the text is not valid TOML: it stops
rewriting and hands the rest over unchanged, so ``tomli`` reports the error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

import tomli

from apps.policy.rules.errors import PolicyParseError

BYTE_ORDER_MARK = "\ufeff"
MAX_NESTING = 80
MAX_KEY_PARTS = 80
INTEGER_MIN = -(2**127)
INTEGER_MAX = 2**128 - 1

_BLANK = re.compile(r"[ \t]*")
_NEWLINE = re.compile(r"\r?\n")
_COMMENT = re.compile(r"#[^\r\n]*")
_GAP = re.compile(r"(?:[ \t]+|#[^\r\n]*|\r?\n)*+")  # blanks, comments, line breaks
_GAP_BREAK = re.compile(r"#[^\r\n]*|\r?\n")  # the comments and line breaks in a gap
_ILLEGAL_COMMENT_CHAR = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Strings are matched whole; the possessive loops never backtrack over an unterminated one.
_BASIC = r'"(?:[^"\\\r\n]|\\.)*+"'
_LITERAL = r"'[^'\r\n]*'"
_MULTILINE_BASIC = r'"""(?:[^"\\]|\\[\s\S]|"(?!""))*+""""{0,2}'
_MULTILINE_LITERAL = r"'''(?:[^']|'(?!''))*+''''{0,2}"
_STRING = re.compile("|".join([_MULTILINE_BASIC, _MULTILINE_LITERAL, _BASIC, _LITERAL]))
_KEY_PART = re.compile("|".join([r"[A-Za-z0-9_-]+", _BASIC, _LITERAL]))
# Numbers, booleans, inf/nan, dates and times: everything unquoted a value can be.
_BARE_VALUE = re.compile(r"[A-Za-z0-9_+\-.:]+")
_LOCAL_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIME_START = re.compile(r"\d{2}:", re.ASCII)
_DATE_TIME = re.compile(
    r"(?:(?P<year>\d{4})-\d{2}-\d{2})?"
    r"(?:(?(year)[Tt ])\d{2}:\d{2}(?::(?P<second>\d{2}))?(?:\.\d+)?"
    r"(?(year)(?:[Zz]|[+-]\d{2}:\d{2})?))?",
    re.ASCII,
)
_CLOSER = {"[": "]", "{": "}"}
_INFINITE_FLOAT_LITERALS = frozenset({"inf", "+inf", "-inf"})


def parse_toml(text: str) -> dict[str, object]:
    """The document as ``tomli`` reads it after the shim; :class:`PolicyParseError` if not TOML
    the SDK would load."""
    _require_utf8(text)
    prepared = prepare(text.removeprefix(BYTE_ORDER_MARK))
    try:
        document: dict[str, object] = tomli.loads(prepared.text, parse_float=_parse_float)
    except PolicyParseError:
        raise
    except (ValueError, RecursionError) as error:  # TOMLDecodeError is a ValueError
        raise PolicyParseError(f"not valid TOML: {error}") from None
    outside = find_integer_outside(document, INTEGER_MIN, INTEGER_MAX)
    if outside is not None:
        raise PolicyParseError(f"integer {outside} is outside -2**127 .. 2**128-1")
    return document


@dataclass(frozen=True)
class Prepared:
    """The shim's output. ``understood`` is false when the pass stopped early because the
    text is not TOML; the rest of ``text`` is then the input, unchanged."""

    text: str
    understood: bool


def prepare(text: str) -> Prepared:
    """Run the shim over BOM-less text (:class:`PolicyParseError` when a nesting or
    key-length limit is exceeded)."""
    shim = _Shim(text)
    try:
        shim.run()
    except _Unexpected:  # not TOML: tomli will say where
        return Prepared(text=shim.rewritten(), understood=False)
    return Prepared(text=shim.rewritten(), understood=True)


def find_integer_outside(value: object, low: int, high: int) -> int | None:
    """The first integer anywhere inside ``value`` (at any depth) not in ``low .. high``."""
    return next((number for number in _integers(value) if not low <= number <= high), None)


def _integers(value: object) -> Iterator[int]:
    pending = [value]  # a stack, not recursion: dotted keys can nest thousands deep
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            yield item


def _require_utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PolicyParseError(
            f"not encodable as UTF-8 (lone surrogate at offset {error.start})"
        ) from None


def _parse_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value) and literal not in _INFINITE_FLOAT_LITERALS:
        raise PolicyParseError(f"float literal {literal} overflows to infinity")
    return value


def _validation_spelling(token: str) -> str:
    """A date/time token with second 60 read as 59 and year 0000 as 2000; others unchanged."""
    match = _DATE_TIME.fullmatch(token)
    if match is None:
        return token
    for group, invalid, valid in (("year", "0000", "2000"), ("second", "60", "59")):
        if match.group(group) == invalid:
            start, end = match.span(group)
            token = token[:start] + valid + token[end:]  # same length: spans stay put
    return token


class _Unexpected(Exception):
    """The text stops being TOML here; the shim gives up and leaves the rest to tomli."""


class _Shim:
    """One pass over the text: tracks strings, keys and open containers, counts the limits
    and collects the rewrites (see the module docstring)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self._pieces: list[str] = []
        self._copied = 0

    def rewritten(self) -> str:
        return "".join(self._pieces) + self.text[self._copied :]

    def run(self) -> None:
        while True:
            self._skip_blank()
            if self._peek() == "[":
                self._table_header()
            elif self._peek() not in ("#", "\r", "\n", ""):
                self._key_value()
            self._end_of_line()
            if self.pos >= len(self.text):
                return

    # -- statements ------------------------------------------------------------------------

    def _table_header(self) -> None:
        self._expect("[")
        closer = "]]" if self._accept("[") else "]"
        self._key()
        self._expect(closer)

    def _key_value(self) -> None:
        self._key()
        self._expect("=")
        self._skip_blank()
        self._value()

    def _end_of_line(self) -> None:
        self._skip_blank()
        self._match(_COMMENT)
        if self.pos < len(self.text) and self._match(_NEWLINE) is None:
            raise _Unexpected

    def _key(self) -> None:
        """A dotted key (blanks around dots allowed), counting its parts."""
        parts = 0
        while True:
            self._skip_blank()
            if self._match(_KEY_PART) is None:
                raise _Unexpected
            parts += 1
            if parts > MAX_KEY_PARTS:
                self._limit(f"a key or table header has more than {MAX_KEY_PARTS} parts")
            self._skip_blank()
            if not self._accept("."):
                return

    # -- values ----------------------------------------------------------------------------

    def _value(self) -> None:
        """One complete value, however deeply it nests (iteratively, not recursively)."""
        open_containers: list[str] = []
        while True:
            opener = self._peek()
            if opener in ("[", "{"):
                self._open(open_containers)
                if not self._close_if_empty(open_containers):
                    if opener == "{":
                        self._inline_key()
                    continue
            else:
                self._scalar()
            if not self._another_value_follows(open_containers):
                return

    def _open(self, open_containers: list[str]) -> None:
        open_containers.append(self._peek())
        self.pos += 1
        if len(open_containers) > MAX_NESTING:
            self._limit(f"a value nests more than {MAX_NESTING} arrays / inline tables")
        self._skip_gap()

    def _close_if_empty(self, open_containers: list[str]) -> bool:
        if not self._accept(_CLOSER[open_containers[-1]]):
            return False
        open_containers.pop()
        return True

    def _another_value_follows(self, open_containers: list[str]) -> bool:
        """After a value: close finished containers; True when a further element follows."""
        while open_containers:
            self._skip_gap()
            closer = _CLOSER[open_containers[-1]]
            if self._accept(","):
                self._skip_gap()
                if self._peek() != closer:  # a trailing comma is closed just below
                    if open_containers[-1] == "{":
                        self._inline_key()
                    return True
            self._expect(closer)
            open_containers.pop()
        return False

    def _inline_key(self) -> None:
        """``key =`` inside an inline table, where the SDK lets breaks and comments stand
        around the ``=`` (only when the key is complete: not inside a dotted key)."""
        self._key()
        gap = self._skip_gap()
        if self._peek() == "=":
            self._flatten(gap)
        self._expect("=")
        self._flatten(self._skip_gap())

    def _scalar(self) -> None:
        if self._match(_STRING) is not None:
            return
        word = self._match(_BARE_VALUE)
        if word is None:
            raise _Unexpected
        start = word.start()
        if _LOCAL_DATE.fullmatch(word.group()) and self.text.startswith(" ", self.pos):
            time = _BARE_VALUE.match(self.text, self.pos + 1)
            if time is not None and _TIME_START.match(time.group()):
                self.pos = time.end()  # "1979-05-27 07:32" is one token
        token = self.text[start : self.pos]
        spelling = _validation_spelling(token)
        if spelling != token:
            self._replace(start, self.pos, spelling)

    # -- gaps and rewriting ----------------------------------------------------------------

    def _skip_gap(self) -> tuple[int, int]:
        """Skip blanks, comments and line breaks; the span skipped."""
        start = self.pos
        self._match(_GAP)
        return start, self.pos

    def _flatten(self, gap: tuple[int, int]) -> None:
        """Turn each comment and line break in ``gap`` into one space (a comment with an
        illegal character stops the shim: tomli must see it as it is)."""
        for found in _GAP_BREAK.finditer(self.text, *gap):
            if _ILLEGAL_COMMENT_CHAR.search(found.group().rstrip("\r\n")):
                raise _Unexpected
            self._replace(found.start(), found.end(), " ")

    def _replace(self, start: int, end: int, replacement: str) -> None:
        self._pieces.append(self.text[self._copied : start])
        self._pieces.append(replacement)
        self._copied = end

    # -- low-level reading -----------------------------------------------------------------

    def _peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def _match(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        match = pattern.match(self.text, self.pos)
        if match is not None:
            self.pos = match.end()
        return match

    def _accept(self, literal: str) -> bool:
        if not self.text.startswith(literal, self.pos):
            return False
        self.pos += len(literal)
        return True

    def _expect(self, literal: str) -> None:
        if not self._accept(literal):
            raise _Unexpected

    def _skip_blank(self) -> None:
        self._match(_BLANK)

    def _limit(self, problem: str) -> NoReturn:
        line = self.text.count("\n", 0, self.pos) + 1
        raise PolicyParseError(f"{problem} (line {line})")
