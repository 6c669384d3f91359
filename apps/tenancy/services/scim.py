"""SCIM 2.0 provisioning, tenancy's part: the org's provisioning tokens, the people and groups
its identity provider pushes, and the role those groups give.

Who holds which membership follows from them: :func:`scim_role` (the highest role a
person's groups map to, through the roles' own ordering), applied by
``apps.approvals.services.members.member_provisioning_apply``, which also deprovisions
(membership, sessions and approver keys in one transaction) a person who is deactivated,
deleted, or left with no role.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from apps.common.errors import DomainError, Forbidden, InvalidInput, NotFound
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.middleware import member_org_ids
from apps.tenancy.models import (
    AuditKind,
    Membership,
    Org,
    Role,
    ScimGroup,
    ScimGroupMember,
    ScimToken,
    ScimUser,
    SsoConfig,
)
from apps.tenancy.org_context import activate_orgs
from apps.tenancy.services.api_keys import key_digest
from apps.tenancy.services.invitations import account_for_email
from apps.tenancy.services.memberships import acting_role

TOKEN_TAG = "scim_"  # noqa: S105 (the public start of every token)


class ScimConflict(DomainError):
    code = "conflict"


@dataclass(frozen=True)
class IssuedScimToken:
    token: ScimToken
    secret: str  # shown once, never stored


def scim_token_issue(*, org: Org, label: str = "", actor: Actor) -> IssuedScimToken:
    """A provisioning token for ``org`` (owners only: it creates and removes members)."""
    if actor.user is not None:
        own = acting_role(actor.user, org)
        if own is None or not own.at_least(Role.OWNER):
            raise Forbidden(f"provisioning tokens of {org} are issued by its owners")
    prefix = TOKEN_TAG + secrets.token_hex(6)
    secret = f"{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        token = ScimToken.objects.create(
            org=org, label=label, prefix=prefix, digest=key_digest(secret)
        )
        org_audit_record(
            org=org, kind=AuditKind.SCIM_TOKEN_ISSUED, actor=actor,
            summary=f"provisioning token {prefix} issued", detail={"prefix": prefix},
        )  # fmt: skip
    return IssuedScimToken(token=token, secret=secret)


def scim_token_revoke(*, org: Org, prefix: str, actor: Actor) -> ScimToken:
    """Stop a provisioning token at once (owners only)."""
    if actor.user is not None:
        own = acting_role(actor.user, org)
        if own is None or not own.at_least(Role.OWNER):
            raise Forbidden(f"provisioning tokens of {org} are revoked by its owners")
    with transaction.atomic():
        token = ScimToken.objects.select_for_update().filter(org=org, prefix=prefix).first()
        if token is None:
            raise NotFound(f"no provisioning token {prefix} in {org}")
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            org_audit_record(
                org=org, kind=AuditKind.SCIM_TOKEN_REVOKED, actor=actor,
                summary=f"provisioning token {prefix} revoked", detail={"prefix": prefix},
            )  # fmt: skip
    return token


class _TokenRow(NamedTuple):
    token_id: int
    org_id: int
    digest: str
    revoked: bool


def scim_authenticate(presented: str) -> ScimToken | None:
    """The active token ``presented`` is, with this connection limited to its org; None
    for anything else. On PostgreSQL the row is found through tenancy's SECURITY DEFINER
    resolver (migration 0017): nobody is signed in yet."""
    if not presented.startswith(TOKEN_TAG) or presented.count("_") < 2:
        return None
    prefix = presented[: len(TOKEN_TAG) + 12]
    row: _TokenRow | None = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM mirror_scim_token(%s)", [prefix])
            found = cursor.fetchone()
        row = _TokenRow(*found) if found else None
    else:
        token = ScimToken.objects.filter(prefix=prefix).first()
        if token is not None:
            row = _TokenRow(token.pk, token.org_id, token.digest, token.revoked_at is not None)
    if row is None or row.revoked or not constant_time_compare(row.digest, key_digest(presented)):
        return None
    activate_orgs([row.org_id])
    ScimToken.objects.filter(pk=row.token_id).update(last_used_at=timezone.now())
    return ScimToken.objects.select_related("org").get(pk=row.token_id)


def scim_actor(token: ScimToken) -> Actor:
    return Actor(via="scim", name=f"SCIM token {token.prefix}")


# --- People --------------------------------------------------------------------------------


def _linkable(user: AbstractBaseUser, org: Org) -> bool:
    """An existing account the org's identity provider may take: this org's alone (or no
    org's) and no operator's; as single sign-on links accounts."""
    if getattr(user, "is_superuser", False):
        return False
    # Every org of the account, whatever this connection's org context (row-level security
    # would show this org's memberships only).
    return set(member_org_ids(int(user.pk))) <= {org.pk}


def scim_user_create(
    *, org: Org, user_name: str, email: str = "", given_name: str = "", family_name: str = "",
    external_id: str = "", active: bool = True, actor: Actor,
) -> ScimUser:  # fmt: skip
    """Provision a person: their account (a new one with no usable password, or an
    existing one that is this org's alone), no membership yet (their groups give it)."""
    user_name = user_name.strip()
    if not user_name:
        raise InvalidInput("userName is required")
    email = (email or (user_name if "@" in user_name else "")).strip()
    with transaction.atomic():
        if ScimUser.objects.filter(org=org, user_name__iexact=user_name).exists():
            raise ScimConflict(f"{user_name} is provisioned already")
        user = account_for_email(email) if email else None
        if user is None:
            user = get_user_model()._default_manager.filter(username__iexact=user_name).first()
        if user is not None and not _linkable(user, org):
            raise ScimConflict(f"an account for {user_name} exists that this org may not take over")
        if user is None:
            user_model = get_user_model()
            user = user_model(
                **{user_model.USERNAME_FIELD: user_name}, email=email, is_staff=True,
                first_name=given_name[:150], last_name=family_name[:150],
            )  # fmt: skip
            user.set_unusable_password()
            user.save()
        scim_user = ScimUser.objects.create(
            org=org, user_id=user.pk, user_name=user_name, given_name=given_name[:150],
            family_name=family_name[:150], external_id=external_id[:255], active=active,
        )  # fmt: skip
        org_audit_record(
            org=org, kind=AuditKind.MEMBER_PROVISIONED, actor=actor,
            summary=f"{user_name} provisioned", detail={"user_name": user_name, "email": email},
        )  # fmt: skip
    return scim_user


def scim_user_update(
    *, scim_user: ScimUser, user_name: str | None = None, email: str | None = None,
    given_name: str | None = None, family_name: str | None = None,
    external_id: str | None = None, active: bool | None = None,
) -> ScimUser:  # fmt: skip
    """Change what the identity provider says of a person (membership: see the module)."""
    fields = {"user_name": user_name, "given_name": given_name, "family_name": family_name,
              "external_id": external_id, "active": active}  # fmt: skip
    changed = [name for name, value in fields.items() if value is not None]
    with transaction.atomic():
        for name in changed:
            setattr(scim_user, name, fields[name])
        if changed:
            scim_user.save(update_fields=[*changed, "updated_at"])
        if email is not None:
            get_user_model()._default_manager.filter(pk=scim_user.user_id).update(email=email)
    return scim_user


def scim_user_forget(*, scim_user: ScimUser) -> None:
    """The provider deleted the person: their SCIM record goes (deprovisioning happens
    first, by the caller, in the same transaction); the account stays, deactivated."""
    scim_user.delete()


# --- Groups and the role they give ---------------------------------------------------------


def _group_roles(org: Org) -> dict[str, Role]:
    """Group name -> role: single sign-on's group per role where the org set one, else
    each role's own name (``viewer``, ``auditor``, ...)."""
    config = SsoConfig.objects.filter(org=org).first()
    mapped = (config.role_groups if config is not None else {}) or {}
    names = {role.value: role for role in Role}
    return {group: Role(role) for role, group in mapped.items() if role in Role.values} or names


def scim_role(scim_user: ScimUser) -> Role | None:
    """The highest role the person's groups give (compared through the roles' ordering),
    else the org's single sign-on default role, else none."""
    roles = _group_roles(scim_user.org)
    names = ScimGroupMember.objects.filter(user=scim_user).values_list(
        "group__display_name", flat=True
    )
    best: Role | None = None
    for name in names:
        role = roles.get(name)
        if role is not None and (best is None or role.at_least(best)):
            best = role
    if best is None:
        config = SsoConfig.objects.filter(org_id=scim_user.org_id).first()
        if config is not None and config.default_role:
            best = Role(config.default_role)
    return best


def scim_membership_set(*, scim_user: ScimUser, role: Role, actor: Actor) -> Membership:
    """Give the provisioned person ``role`` (a new membership or a changed role)."""
    org, user = scim_user.org, scim_user.user
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(org=org, user=user).first()
        name = user.get_username()
        if membership is None:
            membership = Membership.objects.create(org=org, user=user, role=role)
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ADDED, actor=actor,
                summary=f"{name} added as {role.value} by provisioning",
                detail={"username": name, "role": role.value},
            )  # fmt: skip
        elif membership.role != role:
            previous, membership.role = membership.role, role
            membership.save(update_fields=["role"])
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ROLE_CHANGED, actor=actor,
                summary=f"{name} is now {role.value} (was {previous}) by provisioning",
                detail={"username": name, "role": role.value, "previous_role": previous},
            )  # fmt: skip
    return membership


def _members(org: Org, scim_ids: Iterable[str]) -> list[ScimUser]:
    wanted = {str(value) for value in scim_ids}
    found = [user for user in ScimUser.objects.filter(org=org) if str(user.scim_id) in wanted]
    missing = wanted - {str(user.scim_id) for user in found}
    if missing:
        raise NotFound(f"no provisioned user {sorted(missing)[0]}")
    return found


def scim_group_save(
    *, org: Org, group: ScimGroup | None, display_name: str | None, external_id: str | None,
    add: Iterable[str] = (), remove: Iterable[str] = (), replace: Iterable[str] | None = None,
) -> tuple[ScimGroup, set[int]]:  # fmt: skip
    """Create or change a group and its members (by their SCIM ids); the ids of the
    provisioned people whose groups changed, whose role the caller applies."""
    with transaction.atomic():
        if group is None:
            if not display_name:
                raise InvalidInput("displayName is required")
            if ScimGroup.objects.filter(org=org, display_name=display_name).exists():
                raise ScimConflict(f"a group {display_name!r} is provisioned already")
            group = ScimGroup.objects.create(
                org=org, display_name=display_name, external_id=external_id or ""
            )
        else:
            if display_name is not None:
                group.display_name = display_name
            if external_id is not None:
                group.external_id = external_id
            group.save()
        before = set(ScimGroupMember.objects.filter(group=group).values_list("user_id", flat=True))
        after = set(before)
        if replace is not None:
            after = {user.pk for user in _members(org, replace)}
        after |= {user.pk for user in _members(org, add)}
        after -= {user.pk for user in _members(org, remove)}
        ScimGroupMember.objects.filter(group=group, user_id__in=before - after).delete()
        ScimGroupMember.objects.bulk_create(
            [ScimGroupMember(org=org, group=group, user_id=pk) for pk in after - before]
        )
        # A renamed group changes the role of everyone in it.
        affected = (before ^ after) | (after if display_name is not None else set())
    return group, affected


def scim_group_delete(*, group: ScimGroup) -> set[int]:
    members = set(ScimGroupMember.objects.filter(group=group).values_list("user_id", flat=True))
    group.delete()
    return members
