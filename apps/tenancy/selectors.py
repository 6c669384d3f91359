"""Reads for tenancy; every read takes the org explicitly."""

from __future__ import annotations

from django.db import connection
from django.db.models import QuerySet

from apps.common.errors import NotFound
from apps.tenancy.models import ApiKey, Invitation, Membership, Org, SsoConfig


def org_get(*, slug: str) -> Org:
    org = Org.objects.filter(slug=slug).first()
    if org is None:
        raise NotFound(f"no org with slug {slug!r}")
    return org


def api_key_list(*, org: Org) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(org=org).order_by("created_at", "prefix")


def member_org_id(*, user_id: object, org_slug: object) -> int | None:
    """The id of the org ``org_slug`` if ``user_id`` is a member of it (any role), else None.

    Resolved before any org context exists, so on PostgreSQL it goes through the
    SECURITY DEFINER resolver of tenancy's RLS migration.
    """
    if not isinstance(user_id, int | str) or not isinstance(org_slug, str):
        return None
    try:
        user_pk = int(user_id)
    except ValueError:
        return None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT mirror_member_org(%s, %s)", [user_pk, org_slug])
            row = cursor.fetchone()
        return None if row is None or row[0] is None else int(row[0])
    org_id = (
        Membership.objects.filter(user_id=user_pk, org__slug=org_slug)
        .values_list("org_id", flat=True)
        .first()
    )
    return org_id


def invitation_list(*, org: Org) -> QuerySet[Invitation]:
    return Invitation.objects.filter(org=org).order_by("-created_at", "-id")


def invitation_get(*, org: Org, invitation_id: int) -> Invitation:
    invitation = Invitation.objects.filter(org=org, pk=invitation_id).first()
    if invitation is None:
        raise NotFound(f"no invitation {invitation_id} in {org}")
    return invitation


def sso_config(*, org: Org) -> SsoConfig | None:
    """The org's enabled single sign-on, if it has one."""
    return SsoConfig.objects.filter(org=org, enabled=True).first()
