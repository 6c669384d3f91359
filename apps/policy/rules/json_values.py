"""TOML values as the SDK's JSON sees them (policy.md §2.2 and §8).

The SDK turns a condition's ``value`` into JSON before it evaluates or ships it, and the
team-path bundle must carry that same JSON. Doing the conversion once, at load time, means
evaluation and rendering can never disagree about a value:

* strings, booleans, integers and finite floats stay as they are;
* ``nan``, ``inf`` and ``-inf`` become ``null`` (JSON has no such numbers);
* arrays and tables convert element by element;
* a TOML date, time or datetime becomes ``{"$__toml_private_datetime": "<text>"}``, which is
  literally how the SDK's TOML layer carries one. The text uses ``T``, always has seconds,
  drops trailing zeros of a fraction and writes ``Z`` for a zero offset.

Known losses (policy.md §9 question 2): Python keeps microseconds only, ``+00:00`` and
``-00:00`` print as ``Z``, and the validation-only substitutions of
:mod:`apps.policy.rules.toml_dialect` (second 60 read as 59, year 0000 as 2000) show through.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta

from apps.policy.rules.model import JsonValue

DATETIME_KEY = "$__toml_private_datetime"


def toml_to_json(value: object) -> JsonValue:
    """The JSON the SDK derives from a value that ``tomli`` produced."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [toml_to_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): toml_to_json(item) for key, item in value.items()}
    if isinstance(value, date | time):
        return {DATETIME_KEY: datetime_text(value)}
    raise TypeError(f"not a TOML value: {type(value).__name__}")


def datetime_text(value: date | time) -> str:
    """The SDK's spelling of a TOML date, time or datetime (with or without offset)."""
    if isinstance(value, datetime):
        return f"{value.date().isoformat()}T{_time_text(value.timetz())}"
    if isinstance(value, date):
        return value.isoformat()
    return _time_text(value)


def _time_text(value: time) -> str:
    text = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    offset = value.utcoffset()
    return text if offset is None else text + _offset_text(offset)


def _offset_text(offset: timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    if minutes == 0:
        return "Z"
    sign = "+" if minutes > 0 else "-"
    hours, minutes = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{minutes:02d}"
