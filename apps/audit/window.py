"""Which rows an evidence export covers, and how they are read: the window (dates, both
inclusive), the window's mirror entries (only those the chain head already covers), and
the one transaction every read of an export runs in, so its members agree."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction
from django.db.models import QuerySet

from apps.common.errors import InvalidInput
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import Org
from apps.tenancy.org_context import settle

# The window ends at midnight after ``to``: the last day whose next day a datetime holds.
LAST_DAY = date.max - timedelta(days=1)


@dataclass(frozen=True)
class EvidenceWindow:
    start: date | None
    end: date | None
    # An archive's window: exactly the entries first … last (by seq), whose dates are
    # ``start`` … ``end``; None for a window of dates alone.
    seqs: tuple[int, int] | None = None


def parse_window(start: str | None, end: str | None) -> EvidenceWindow:
    """``YYYY-MM-DD`` bounds, both inclusive; either may be absent."""

    def parse(text: str | None, name: str) -> date | None:
        if not text:
            return None
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{name}: a date YYYY-MM-DD, got {text!r}") from None
        if day > LAST_DAY:
            raise InvalidInput(f"{name}: a date no later than {LAST_DAY.isoformat()}")
        return day

    window = EvidenceWindow(parse(start, "from"), parse(end, "to"))
    if window.start and window.end and window.start > window.end:
        raise InvalidInput("from: must not be after to")
    return window


def window_rows(org: Org, window: EvidenceWindow, size: int) -> QuerySet[MirrorEntry]:
    # Only entries the head already covers: one appended while the export runs would make
    # the archive's head disagree with its last entry.
    rows = MirrorEntry.objects.filter(org=org, seq__lte=size)
    if window.seqs is not None:
        return rows.filter(seq__gte=window.seqs[0], seq__lte=window.seqs[1])
    if window.start:
        rows = rows.filter(received_at__gte=datetime.combine(window.start, time.min, UTC))
    if window.end:
        end = datetime.combine(window.end + timedelta(days=1), time.min, UTC)
        rows = rows.filter(received_at__lt=end)
    return rows


@contextmanager
def snapshot() -> Iterator[None]:
    """One transaction for every read of the export; a snapshot (``REPEATABLE READ``, read
    only) when the export opens it, so the members agree with each other. Inside it the
    cursors are plain server-side cursors (outside one, PostgreSQL would materialize each
    result ``WITH HOLD`` before the first row)."""
    settle()  # a finished request's context is reset before the transaction's first statement
    opens = not connection.in_atomic_block
    with transaction.atomic():
        if opens and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield
