"""``utc_text``: every moment the service writes as text is UTC with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from apps.common.timestamps import utc_text


def test_a_utc_moment_ends_in_z_with_its_microseconds() -> None:
    assert utc_text(datetime(2026, 11, 27, 7, 53, 56, 123456, tzinfo=UTC)) == (
        "2026-11-27T07:53:56.123456Z"
    )
    assert utc_text(datetime(2026, 11, 27, 7, 53, 56, tzinfo=UTC)) == "2026-11-27T07:53:56Z"


def test_another_offset_is_written_in_utc() -> None:
    two_hours_east = timezone(timedelta(hours=2))
    moment = datetime(2026, 11, 27, 9, 53, 56, tzinfo=two_hours_east)
    assert utc_text(moment) == "2026-11-27T07:53:56Z"


def test_seconds_precision_drops_the_fraction() -> None:
    moment = datetime(2026, 11, 27, 7, 53, 56, 999999, tzinfo=UTC)
    assert utc_text(moment, timespec="seconds") == "2026-11-27T07:53:56Z"
    assert utc_text(moment, timespec="seconds") == moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_no_moment_is_none() -> None:
    assert utc_text(None) is None
