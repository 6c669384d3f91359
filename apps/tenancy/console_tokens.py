"""Dashboard-plane session JWTs, issued to console members.

A token pair carries the user, the org, the member's role and the user's session version.
Access tokens are short-lived; refreshing re-reads the membership, so a removed or
downgraded member gets nothing more than the rest of one access lifetime. (Authentication
also re-reads the membership on every request, so in practice a change applies at once;
the refresh rule is the guarantee.)

A refresh token is spent by its use: refreshing blacklists it (simplejwt's token_blacklist
app) and answers a new pair. Spending one a second time is reuse (a copy of it is in
someone else's hands, or a client retried): it is refused and ends every session token of
the user, the new pair included (OAuth 2.0 security BCP, refresh token rotation).

A session ends by raising the user's :class:`SessionTokenVersion`: every token issued
before (access and refresh) is refused from then on, whatever its lifetime left. That
happens on a password change and a deactivation (from any path: the console, a command,
``set_password``: see :func:`connect_signals`) and on reuse of a refresh token.

A membership removal (``membership_remove``) ends only what that org granted: it raises the
user's :class:`OrgSessionTokenVersion` for that org, so the tokens for that org are refused
and the user's tokens for other orgs live on (an org's managers act on their own org, never
on the user's standing elsewhere).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.signals import post_save, pre_save
from rest_framework_simplejwt.exceptions import TokenError
from rest_framework_simplejwt.settings import api_settings
from rest_framework_simplejwt.token_blacklist.models import BlacklistedToken, OutstandingToken
from rest_framework_simplejwt.tokens import RefreshToken, Token
from rest_framework_simplejwt.utils import datetime_from_epoch

from apps.common.errors import DomainError
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.models import (
    AuditKind,
    Membership,
    OrgSessionTokenVersion,
    SessionTokenVersion,
)
from apps.tenancy.org_context import activate_orgs
from apps.tenancy.selectors import member_org_id

logger = logging.getLogger(__name__)

ORG_CLAIM = "org"
ROLE_CLAIM = "role"
VERSION_CLAIM = "ver"
# The user's session version for the token's org; a token issued before it existed has none,
# read as 0 (no removal from that org since).
ORG_VERSION_CLAIM = "orgver"


class ConsoleTokenRefused(DomainError):
    status = HTTPStatus.UNAUTHORIZED
    code = "unauthorized"


@dataclass(frozen=True)
class ConsoleTokens:
    access: str
    refresh: str
    access_expires_at: datetime
    role: str


class _SpendableRefreshToken(RefreshToken):
    """A refresh token checked for signature, expiry and type. Whether it was spent already
    is decided by spending it (:func:`_spend`): one atomic write, so two concurrent uses
    cannot both pass a read-then-write check."""

    def check_blacklist(self) -> None:
        return None


def _pair_for(membership: Membership) -> ConsoleTokens:
    refresh = RefreshToken.for_user(membership.user)  # recorded as outstanding
    refresh[ORG_CLAIM] = membership.org.slug
    refresh[ROLE_CLAIM] = membership.role
    refresh[VERSION_CLAIM] = _session_version(membership)
    refresh[ORG_VERSION_CLAIM] = _org_session_version(membership)
    access = refresh.access_token
    return ConsoleTokens(
        access=str(access),
        refresh=str(refresh),
        access_expires_at=datetime.fromtimestamp(int(access["exp"]), tz=UTC),
        role=membership.role,
    )


def _session_version(membership: Membership) -> int:
    return int(membership.session_version)  # type: ignore[attr-defined]  # annotated below


def _org_session_version(membership: Membership) -> int:
    return int(membership.org_session_version)  # type: ignore[attr-defined]  # annotated below


def _membership(*, user_id: object, org_slug: object) -> Membership | None:
    """The active membership, resolved before any org context exists (row-level security),
    then read inside its org's context, with the user's session versions, overall and for
    the org (same query)."""
    org_id = member_org_id(user_id=user_id, org_slug=org_slug)
    if org_id is None:
        return None
    activate_orgs([org_id])
    versions = SessionTokenVersion.objects.filter(user_id=OuterRef("user_id")).values("version")
    org_versions = OrgSessionTokenVersion.objects.filter(
        user_id=OuterRef("user_id"), org_id=OuterRef("org_id")
    ).values("version")
    return (
        Membership.objects.select_related("user", "org")
        .annotate(
            session_version=Coalesce(Subquery(versions[:1]), Value(0)),
            org_session_version=Coalesce(Subquery(org_versions[:1]), Value(0)),
        )
        .filter(user_id=int(str(user_id)), org_id=org_id, user__is_active=True)
        .first()
    )


def console_session_membership(*, token: Token) -> Membership | None:
    """The membership a validated session token stands for, or None: the user is active,
    still a member of the token's org, and the token is of the user's current session, overall
    and in that org."""
    membership = _membership(
        user_id=token.get(api_settings.USER_ID_CLAIM), org_slug=token.get(ORG_CLAIM)
    )
    if membership is None or token.get(VERSION_CLAIM) != _session_version(membership):
        return None
    if token.get(ORG_VERSION_CLAIM, 0) != _org_session_version(membership):
        return None
    return membership


def console_tokens_issue(
    *, user: AbstractBaseUser, org_slug: str, via: str = "api"
) -> ConsoleTokens:
    """A dashboard session token pair for a member of ``org_slug``, recorded in the org's
    audit trail as the member's act (``via`` the console button, the API or a command)."""
    membership = _membership(user_id=user.pk, org_slug=org_slug)
    if membership is None:
        raise ConsoleTokenRefused(f"{user.get_username()} is not a member of {org_slug}")
    with transaction.atomic():
        tokens = _pair_for(membership)
        org_audit_record(
            org=membership.org_id, kind=AuditKind.CONSOLE_TOKEN_ISSUED,
            actor=Actor(via=via, user=user, name=user.get_username()),
            summary=f"dashboard session token issued to {user.get_username()}",
            detail={"username": user.get_username(), "role": membership.role},
        )  # fmt: skip
    return tokens


def _spend(token: RefreshToken) -> bool:
    """Blacklist ``token``; False when it was blacklisted already (its second use)."""
    outstanding, _ = OutstandingToken._default_manager.get_or_create(
        jti=token[api_settings.JTI_CLAIM],
        defaults={
            "user_id": token.get(api_settings.USER_ID_CLAIM),
            "token": str(token),
            "created_at": token.current_time,
            "expires_at": datetime_from_epoch(token["exp"]),
        },
    )
    _, created = BlacklistedToken._default_manager.get_or_create(token=outstanding)
    return bool(created)


def console_tokens_refresh(*, refresh: str) -> ConsoleTokens:
    """A new pair for a live refresh token, with the member's current role; the token
    presented is spent. A spent one presented again ends the user's session tokens."""
    try:
        token = _SpendableRefreshToken(refresh)  # type: ignore[arg-type]
    except TokenError as error:
        raise ConsoleTokenRefused(f"refresh token refused: {error}") from error
    membership = console_session_membership(token=token)
    if membership is None:
        raise ConsoleTokenRefused("the session behind this token has ended")
    with transaction.atomic():
        if _spend(token):
            return _pair_for(membership)
    console_sessions_end(user_id=membership.user_id)
    logger.warning(
        "a spent console refresh token was presented again (user %s, org %s): every "
        "session token of the user has ended",
        membership.user_id,
        membership.org.slug,
    )
    raise ConsoleTokenRefused(
        "this refresh token was used already; every session token of this user has ended"
    )


def console_sessions_end(*, user_id: int) -> int:
    """End every session token of the user (access and refresh): the new version."""
    with transaction.atomic():
        SessionTokenVersion.objects.get_or_create(user_id=user_id)
        SessionTokenVersion.objects.filter(user_id=user_id).update(version=F("version") + 1)
        return SessionTokenVersion.objects.get(user_id=user_id).version


def console_org_sessions_end(*, user_id: int, org_id: int) -> int:
    """End the user's session tokens for one org (access and refresh), and only those: the
    org's new version for the user."""
    with transaction.atomic():
        OrgSessionTokenVersion.objects.get_or_create(user_id=user_id, org_id=org_id)
        versions = OrgSessionTokenVersion.objects.filter(user_id=user_id, org_id=org_id)
        versions.update(version=F("version") + 1)
        return versions.get().version


# --- a password change or a deactivation ends the user's sessions, whatever the path -----

_CREDENTIAL_FIELDS = frozenset({"password", "is_active"})


def _note_credential_change(
    sender: Any, instance: Any, update_fields: Any = None, **kwargs: Any
) -> None:
    instance._mirror_ends_sessions = False
    if instance.pk is None or kwargs.get("raw"):
        return
    if update_fields is not None and not _CREDENTIAL_FIELDS & set(update_fields):
        return  # e.g. last_login on every sign-in: no read
    stored = sender._default_manager.filter(pk=instance.pk).values("password", "is_active")
    before = stored.first()
    if before is None:
        return
    instance._mirror_ends_sessions = before["password"] != instance.password or (
        before["is_active"] and not instance.is_active
    )


def _end_sessions_after_credential_change(sender: Any, instance: Any, **kwargs: Any) -> None:
    if getattr(instance, "_mirror_ends_sessions", False):
        instance._mirror_ends_sessions = False
        console_sessions_end(user_id=instance.pk)


def connect_signals() -> None:
    user_model = get_user_model()
    pre_save.connect(_note_credential_change, sender=user_model,
                     dispatch_uid="mirror_note_credential_change")  # fmt: skip
    post_save.connect(_end_sessions_after_credential_change, sender=user_model,
                      dispatch_uid="mirror_end_sessions_after_credential_change")  # fmt: skip
