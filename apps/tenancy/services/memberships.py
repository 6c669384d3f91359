"""Writes for memberships: adding a member or changing their role, removing one.

Each operator act takes the :class:`~apps.tenancy.audit_trail.Actor` who makes it and writes it
into the org's audit trail (:func:`org_audit_record`) in the same transaction.
"""

from __future__ import annotations

from http import HTTPStatus

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import transaction

from apps.common.errors import DomainError, Forbidden, InvalidInput, NotFound
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.console_tokens import console_org_sessions_end
from apps.tenancy.models import AuditKind, Membership, Org, Role


class LastOwner(DomainError):
    """An org keeps at least one owner: its last one is neither demoted nor removed."""

    status = HTTPStatus.CONFLICT
    code = "last_owner"


def acting_role(actor: AbstractBaseUser | AnonymousUser, org: Org) -> Role | None:
    if getattr(actor, "is_superuser", False):  # operators hold every org
        return Role.OWNER
    if actor.pk is None:
        return None
    roles = Membership.objects.filter(user_id=actor.pk, org=org).values_list("role", flat=True)
    current = roles.first()
    return Role(current) if current is not None else None


def _check_membership_change(
    *,
    org: Org,
    username: str,
    membership: Membership | None,
    role: Role | None,
    actor: Actor,
) -> None:
    """The one rule for every change of a membership (added, role changed, removed: ``role``
    None): nobody grants, changes or removes a role above their own, and the last owner of
    an org stays one. An actor without a user is an operator (a management command)."""
    current = Role(membership.role) if membership is not None else None
    if actor.user is not None:
        own = acting_role(actor.user, org)
        if own is None or not own.at_least(Role.MANAGER):
            raise Forbidden(f"changing members of {org} needs the manager role")
        if role is not None and not own.at_least(role):
            raise Forbidden(f"a {own.label.lower()} cannot grant the {role.value} role")
        if current is not None and not own.at_least(current):
            act = "remove" if role is None else "change the role of"
            raise Forbidden(f"a {own.label.lower()} cannot {act} an {current.value}")
    if membership is not None and current == Role.OWNER and role != Role.OWNER:
        others = Membership.objects.filter(org=org, role=Role.OWNER).exclude(pk=membership.pk)
        if not others.exists():
            act = "removed" if role is None else "demoted"
            raise LastOwner(
                f"{username} is the last owner of {org} and cannot be {act}; "
                "make another member owner first"
            )


def _locked_membership(*, org: Org, username: str) -> Membership | None:
    """The membership, locked, with its org locked first: every membership change of one
    org is serialized, so two concurrent demotions cannot both see another owner."""
    Org.objects.select_for_update().filter(pk=org.pk).values_list("pk", flat=True).first()
    return (
        Membership.objects.select_for_update()
        .select_related("user")
        .filter(org=org, user__username=username)
        .first()
    )


def _check_existing_account_joins(*, org: Org, username: str, actor: Actor) -> None:
    """An existing account joins an org with consent: the account's own, by accepting an
    invitation (apps.tenancy.services.invitations), or a superuser's (or an operator's
    command). An org's managers create new accounts only: adding someone else's account
    would let any org's manager act on a user they do not manage (and end that user's
    session tokens by removing them again)."""
    if actor.user is None or getattr(actor.user, "is_superuser", False):
        return
    raise Forbidden(
        f"{username} already has an account: an existing account joins {org} by accepting "
        "an invitation to its email address"
    )


def membership_add(
    *,
    org: Org,
    username: str,
    role: str,
    password: str | None = None,
    actor: Actor = OPERATOR,
) -> Membership:
    """Give ``username`` the ``role`` in ``org`` (a new membership or a changed role),
    creating the console user if needed; a console user acting is held to
    :func:`_check_membership_change` (an operator at the command line is not), and adds an
    existing account to an org only as a superuser (:func:`_check_existing_account_joins`).

    A new account gets staff status so it can sign in to the console (the Django admin); an
    existing account's staff and superuser flags are never changed by joining an org.
    """
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; known: {', '.join(Role.values)}")
    user_model = get_user_model()
    with transaction.atomic():
        existing = _locked_membership(org=org, username=username)
        _check_membership_change(
            org=org, username=username, membership=existing, role=Role(role), actor=actor
        )
        user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
        if user is None:
            user = user_model(**{user_model.USERNAME_FIELD: username}, is_staff=True)
            if password is not None:
                user.set_password(password)
            else:
                user.set_unusable_password()
            user.save()
        else:
            if existing is None:
                _check_existing_account_joins(org=org, username=username, actor=actor)
            if password is not None:
                user.set_password(password)  # a changed password ends the user's session tokens
                user.save(update_fields=["password"])
        detail = {"username": username, "role": role}
        if existing is None:
            membership = Membership.objects.create(user=user, org=org, role=role)
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ADDED, actor=actor, detail=detail,
                summary=f"{username} added as {role}",
            )  # fmt: skip
        else:
            membership = existing
            if membership.role != role:
                detail["previous_role"] = membership.role
                membership.role = role
                membership.save(update_fields=["role"])
                org_audit_record(
                    org=org, kind=AuditKind.MEMBERSHIP_ROLE_CHANGED, actor=actor, detail=detail,
                    summary=f"{username} is now {role} (was {detail['previous_role']})",
                )  # fmt: skip
    return membership


def membership_remove(*, org: Org, username: str, actor: Actor = OPERATOR) -> Membership:
    """Take ``username`` out of ``org`` (same rule as :func:`membership_add`) and end the
    user's session tokens for ``org``: what this org granted, and nothing else (the user's
    tokens for other orgs are not this org's to end)."""
    with transaction.atomic():
        membership = _locked_membership(org=org, username=username)
        if membership is None:
            raise NotFound(f"{username} is not a member of {org}")
        _check_membership_change(
            org=org, username=username, membership=membership, role=None, actor=actor
        )
        membership.delete()
        console_org_sessions_end(user_id=membership.user_id, org_id=org.pk)
        org_audit_record(
            org=org, kind=AuditKind.MEMBERSHIP_REMOVED, actor=actor,
            summary=f"{username} removed (was {membership.role})",
            detail={"username": username, "role": membership.role},
        )  # fmt: skip
    return membership
