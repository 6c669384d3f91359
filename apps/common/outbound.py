"""Outbound events, as the lower floors see them: one call, ``emit``.

The services that change state (approvals, receipts, policy, tenancy) sit below the app
that delivers events (``apps.events``), so they cannot import it. They call :func:`emit`
here, inside the transaction that makes the change; ``apps.events`` registers the one sink
at start-up, which records the event and enqueues its deliveries in that same
transaction (an event exists if and only if its change committed).

The payload is a callable, built only when the org has a subscriber for the event type:
an org with no endpoint and no email subscriber pays a dictionary lookup per change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PayloadFactory = Callable[[], dict[str, Any]]
Sink = Callable[[int, str, PayloadFactory], object]

_sink: Sink | None = None
_wanted: Callable[[int, str], bool] | None = None

# Fractions of the monthly cap at which ``quota.threshold`` fires, once each per month.
QUOTA_THRESHOLDS = (80, 100)


def register_sink(sink: Sink | None, wanted: Callable[[int, str], bool] | None = None) -> None:
    """Install the sink (``apps.events`` at ready time; ``None`` switches events off) and
    the cheap question it answers first (does anyone subscribe to this type here?)."""
    global _sink, _wanted
    _sink = sink
    _wanted = wanted if sink is not None else None


def wanted(org_id: int, event_type: str) -> bool:
    """Would ``emit`` record this event? For a caller that opens a transaction only then
    (a single-statement change needs none otherwise)."""
    if _sink is None:
        return False
    return True if _wanted is None else _wanted(org_id, event_type)


def emit(*, org_id: int, event_type: str, payload: PayloadFactory) -> None:
    """Record ``event_type`` for ``org_id`` in the caller's transaction (see module doc)."""
    if _sink is not None:
        _sink(org_id, event_type, payload)


def quota_thresholds_reached(*, count: int, cap: int) -> tuple[int, ...]:
    """The thresholds (percent) that the append bringing the month's count to ``count``
    reaches, when ``quota.threshold`` events are recorded at all (events on). No database:
    the append asks this while its pipeline is open, and records the events outside it."""
    if _sink is None or cap <= 0:
        return ()
    # ceil(cap * percent / 100): the count only grows by one per append, under the head
    # lock, so each threshold is reached by exactly one append a month.
    return tuple(percent for percent in QUOTA_THRESHOLDS if count == -(-cap * percent // 100))


def quota_counted(*, org_id: int, month: str, count: int, cap: int) -> None:
    """The append that brings the month's count to 80% or 100% of ``cap`` emits
    ``quota.threshold``, in the caller's transaction (never inside a pipeline: the sink
    asks the database who subscribes, and records the event)."""
    for percent in quota_thresholds_reached(count=count, cap=cap):
        emit(
            org_id=org_id,
            event_type="quota.threshold",
            payload=lambda percent=percent: {  # type: ignore[misc]
                "month": month,
                "threshold_percent": percent,
                "count": count,
                "cap": cap,
            },
        )


# --- Direct emails ------------------------------------------------------------------------
#
# An email to one address that is not an org's event (an invitation): the service that
# makes the change calls :func:`mail` in its transaction with what the email is about;
# ``apps.events`` registers the mailer of each kind at start-up, which enqueues the sending
# in that same transaction (the email goes if and only if the change committed).

Mailer = Callable[[int], object]
_mailers: dict[str, Mailer] = {}


def register_mailer(kind: str, mailer: Mailer) -> None:
    _mailers[kind] = mailer


def mail(*, kind: str, object_id: int) -> None:
    """Send the email of ``kind`` about row ``object_id``, in the caller's transaction."""
    mailer = _mailers.get(kind)
    if mailer is None:  # apps.events is always installed: a missing mailer is a bug
        raise RuntimeError(f"no mailer registered for {kind!r} emails")
    mailer(object_id)
