"""Dashboard-plane session JWTs, issued to console members.

A token pair carries the user, the org and the member's role. Access tokens are short-lived;
refreshing re-reads the membership, so a removed or downgraded member gets nothing more
than the rest of one access lifetime. (Authentication also re-reads the membership on every
request, so in practice a change applies at once; the refresh rule is the guarantee.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus

from django.contrib.auth.models import AbstractBaseUser
from rest_framework_simplejwt.exceptions import TokenError
from rest_framework_simplejwt.tokens import RefreshToken

from apps.common.errors import DomainError
from apps.tenancy.models import Membership
from apps.tenancy.org_context import activate_orgs
from apps.tenancy.selectors import member_org_id

ORG_CLAIM = "org"
ROLE_CLAIM = "role"


class ConsoleTokenRefused(DomainError):
    status = HTTPStatus.UNAUTHORIZED
    code = "unauthorized"


@dataclass(frozen=True)
class ConsoleTokens:
    access: str
    refresh: str
    access_expires_at: datetime
    role: str


def _pair_for(membership: Membership) -> ConsoleTokens:
    refresh = RefreshToken.for_user(membership.user)
    refresh[ORG_CLAIM] = membership.org.slug
    refresh[ROLE_CLAIM] = membership.role
    access = refresh.access_token
    return ConsoleTokens(
        access=str(access),
        refresh=str(refresh),
        access_expires_at=datetime.fromtimestamp(int(access["exp"]), tz=UTC),
        role=membership.role,
    )


def _membership(*, user_id: object, org_slug: object) -> Membership | None:
    """The active membership, resolved before any org context exists (row-level security),
    then read inside its org's context."""
    org_id = member_org_id(user_id=user_id, org_slug=org_slug)
    if org_id is None:
        return None
    activate_orgs([org_id])
    return (
        Membership.objects.select_related("user", "org")
        .filter(user_id=int(str(user_id)), org_id=org_id, user__is_active=True)
        .first()
    )


def console_tokens_issue(*, user: AbstractBaseUser, org_slug: str) -> ConsoleTokens:
    membership = _membership(user_id=user.pk, org_slug=org_slug)
    if membership is None:
        raise ConsoleTokenRefused(f"{user.get_username()} is not a member of {org_slug}")
    return _pair_for(membership)


def console_tokens_refresh(*, refresh: str) -> ConsoleTokens:
    """A new pair for a valid refresh token, with the member's current role."""
    try:
        token = RefreshToken(refresh)  # type: ignore[arg-type]
    except TokenError as error:
        raise ConsoleTokenRefused(f"refresh token refused: {error}") from error
    membership = _membership(user_id=token.get("user_id"), org_slug=token.get(ORG_CLAIM))
    if membership is None:
        raise ConsoleTokenRefused("the membership behind this token no longer exists")
    return _pair_for(membership)
