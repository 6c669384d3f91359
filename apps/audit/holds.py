"""Writes of legal holds: setting one and releasing it.

A hold keeps what it covers whatever the retention says (which holds cover what is one
selector, :func:`apps.audit.selectors.legal_holds_blocking`). Setting and releasing one
is the owner's act: a console user or dashboard member acting is held to the owner role
here, whichever surface called (the API and the console refuse the other roles before
that); an operator at the command line is not. Each act is written into the org's audit
trail and emitted as an outbound event (``legal_hold.set``, ``legal_hold.released``) in
its transaction.
"""

from __future__ import annotations

import secrets
from datetime import date
from http import HTTPStatus
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.audit.models import HoldScope, LegalHold
from apps.audit.window import LAST_DAY
from apps.common import outbound
from apps.common.errors import DomainError, Forbidden, InvalidInput
from apps.common.timestamps import utc_text
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import AuditKind, Membership, Org, Role

HOLD_ID_PREFIX = "hold_"
REASON_MAX = 500
SESSION_ID_MAX = 200


class HoldReleased(DomainError):
    """The hold was released already: a release is final (set a new hold instead)."""

    status = HTTPStatus.CONFLICT
    code = "conflict"


def _check_owner(*, org: Org, actor: Actor, act: str) -> None:
    """A console user or dashboard member must be an owner of ``org`` (a superuser holds
    every org); an API key never sets or releases a hold; an operator (a command) may."""
    user = actor.user
    if user is None and actor.api_key is None:
        return
    if user is not None and getattr(user, "is_superuser", False):
        return
    if user is not None and user.pk is not None:
        role = Membership.objects.filter(user_id=user.pk, org=org).values_list("role", flat=True)
        if role.first() == Role.OWNER:
            return
    raise Forbidden(f"{act} a legal hold on {org} needs the owner role")


def _reason(text: str, name: str = "reason") -> str:
    reason = (text or "").strip()
    if not reason:
        raise InvalidInput(f"{name}: say why (a case, a request, a ticket)")
    if len(reason) > REASON_MAX:
        raise InvalidInput(f"{name}: at most {REASON_MAX} characters")
    return reason


def _coverage(
    scope: str, range_start: date | None, range_end: date | None, session_id: str
) -> tuple[HoldScope, date | None, date | None, str]:
    """The scope and what it names, checked: each scope takes its own members only."""
    if scope not in HoldScope.values:
        raise InvalidInput(f"scope: one of {', '.join(HoldScope.values)}, got {scope!r}")
    session_id = (session_id or "").strip()
    ranged = range_start is not None or range_end is not None
    if scope == HoldScope.ORG:
        if ranged or session_id:
            raise InvalidInput("an org-wide hold takes no from, to or session_id")
        return HoldScope.ORG, None, None, ""
    if scope == HoldScope.RANGE:
        if session_id:
            raise InvalidInput("a range hold takes no session_id")
        if not ranged:
            raise InvalidInput("a range hold needs from, to or both (YYYY-MM-DD, inclusive)")
        for bound, name in ((range_start, "from"), (range_end, "to")):
            if bound is not None and bound > LAST_DAY:
                raise InvalidInput(f"{name}: a date no later than {LAST_DAY.isoformat()}")
        if range_start and range_end and range_start > range_end:
            raise InvalidInput("from: must not be after to")
        return HoldScope.RANGE, range_start, range_end, ""
    if ranged:
        raise InvalidInput("a session hold takes no from or to")
    if not session_id:
        raise InvalidInput("a session hold needs session_id")
    if len(session_id) > SESSION_ID_MAX:
        raise InvalidInput(f"session_id: at most {SESSION_ID_MAX} characters")
    return HoldScope.SESSION, None, None, session_id


def legal_hold_payload(hold: LegalHold) -> dict[str, Any]:
    """The hold as its events carry it (and as its audit records detail it)."""
    return {
        "hold_id": hold.hold_id,
        "scope": hold.scope,
        "from": hold.range_start.isoformat() if hold.range_start else None,
        "to": hold.range_end.isoformat() if hold.range_end else None,
        "session_id": hold.session_id or None,
        "reason": hold.reason,
        "set_by": hold.set_by_name,
        "set_at": utc_text(hold.set_at),
        "released_at": utc_text(hold.released_at),
        "released_by": hold.released_by_name or None,
        "release_reason": hold.release_reason or None,
    }


def legal_hold_set(
    *,
    org: Org,
    scope: str,
    reason: str,
    range_start: date | None = None,
    range_end: date | None = None,
    session_id: str = "",
    actor: Actor = OPERATOR,
) -> LegalHold:
    """Place a hold on ``org``: the whole org, the days ``range_start`` to ``range_end``
    (UTC, inclusive; either may be open), or one agent session."""
    _check_owner(org=org, actor=actor, act="setting")
    scope, range_start, range_end, session_id = _coverage(scope, range_start, range_end, session_id)
    reason = _reason(reason)
    with transaction.atomic():
        hold = LegalHold.objects.create(
            org=org, hold_id=HOLD_ID_PREFIX + secrets.token_urlsafe(12), scope=scope,
            range_start=range_start, range_end=range_end, session_id=session_id,
            reason=reason, set_by_id=actor.user_id, set_by_name=actor.name[:150],
            set_at=timezone.now(),
        )  # fmt: skip
        payload = legal_hold_payload(hold)
        org_audit_record(
            org=org, kind=AuditKind.LEGAL_HOLD_SET, actor=actor,
            summary=f"Legal hold {hold.hold_id} set on {hold.covers}: {reason}",
            detail=payload,
        )  # fmt: skip
        outbound.emit(org_id=org.pk, event_type="legal_hold.set", payload=payload.copy)
    return hold


def legal_hold_release(*, hold: LegalHold, reason: str, actor: Actor = OPERATOR) -> LegalHold:
    """Lift ``hold``: what it covered follows the retention again (a release is final)."""
    _check_owner(org=hold.org, actor=actor, act="releasing")
    reason = _reason(reason, "reason")
    with transaction.atomic():
        # Locked: two releases of one hold cannot both pass the check below.
        locked = LegalHold.objects.select_for_update().select_related("org").get(pk=hold.pk)
        if not locked.is_active:
            raise HoldReleased(
                f"legal hold {locked.hold_id} was released at {utc_text(locked.released_at)}"
            )
        locked.released_at = timezone.now()
        locked.released_by_id = actor.user_id
        locked.released_by_name = actor.name[:150]
        locked.release_reason = reason
        locked.save(
            update_fields=["released_at", "released_by", "released_by_name", "release_reason"]
        )
        payload = legal_hold_payload(locked)
        org_audit_record(
            org=locked.org_id, kind=AuditKind.LEGAL_HOLD_RELEASED, actor=actor,
            summary=f"Legal hold {locked.hold_id} on {locked.covers} released: {reason}",
            detail=payload,
        )  # fmt: skip
        outbound.emit(org_id=locked.org_id, event_type="legal_hold.released", payload=payload.copy)
    return locked
