"""The one way a moment is written as text: RFC 3339 in UTC with a ``Z`` suffix, as
events, audit records, evidence and the APIs show it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, overload

Precision = Literal["auto", "seconds"]


@overload
def utc_text(moment: datetime, *, timespec: Precision = "auto") -> str: ...
@overload
def utc_text(moment: None, *, timespec: Precision = "auto") -> None: ...
def utc_text(moment: datetime | None, *, timespec: Precision = "auto") -> str | None:
    """``moment`` in UTC as ``2026-11-27T07:53:56.123456Z`` (microseconds when it has
    any; ``timespec="seconds"`` drops them); None stays None, for optional moments."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
