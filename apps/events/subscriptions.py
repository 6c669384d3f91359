"""Who subscribes to what, as this process last read it: every change a service makes
asks (through the ground floor's ``outbound`` hook) before it records an event, so the
answer is kept for EVENTS_SUBSCRIBER_CACHE_SECONDS, and dropped at once when this process
changes an org's subscriptions."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction

from apps.events.models import ADDRESSED_EVENT_TYPES, EmailSubscription, WebhookEndpoint

# org id -> (valid until, monotonic seconds; the event types someone subscribes to)
_subscribers: dict[int, tuple[float, frozenset[str]]] = {}


def subscribed_types(org_id: int) -> frozenset[str]:
    """The event types ``org_id`` has an enabled endpoint or an email subscriber for,
    as this process last read them (at most EVENTS_SUBSCRIBER_CACHE_SECONDS ago)."""
    now = time.monotonic()
    cached = _subscribers.get(org_id)
    if cached is not None and cached[0] > now:
        return cached[1]
    types: set[str] = set()
    for wanted in WebhookEndpoint.objects.filter(org_id=org_id, enabled=True).values_list(
        "event_types", flat=True
    ):
        types.update(wanted)
    types.update(
        EmailSubscription.objects.filter(org_id=org_id).values_list("event_type", flat=True)
    )
    found = frozenset(types)
    _subscribers[org_id] = (now + settings.EVENTS_SUBSCRIBER_CACHE_SECONDS, found)
    return found


def is_subscribed(org_id: int, event_type: str) -> bool:
    """Whether anyone subscribes; an addressed event (a reminder, an escalation) always has
    its recipients."""
    return event_type in ADDRESSED_EVENT_TYPES or event_type in subscribed_types(org_id)


def forget_subscribers(org_id: int | None = None) -> None:
    """Drop this process's view of an org's subscriptions (every org's with ``None``)."""
    if org_id is None:
        _subscribers.clear()
    else:
        _subscribers.pop(org_id, None)


def forget_subscribers_on_commit(org_id: int) -> None:
    forget_subscribers(org_id)
    transaction.on_commit(lambda: forget_subscribers(org_id))
