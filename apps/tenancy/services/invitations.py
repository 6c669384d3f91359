"""Invitations to join an org: sending, sending again, revoking, and accepting one.

An owner or manager invites an email address with a role (never above their own); the
invitee follows the emailed link, which works once and until it expires, and either sets a
password for a new account, joins with the account they are signed in to (its email must be
the invited one), or signs in with the org's single sign-on. Each step is a row of the org's
audit trail, written in the transaction of the change; the email is enqueued in it too
(``apps.common.outbound.mail``), so it goes if and only if the change committed.

The link carries the invitation's id and nonce, signed with the service's secret key
(:func:`invitation_token`): the database holds nothing a reader could turn into a link, and
the email task builds the link from the row when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from http import HTTPStatus

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare, get_random_string

from apps.common import outbound
from apps.common.errors import DomainError, Forbidden, InvalidInput, NotFound
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import (
    AuditKind,
    Invitation,
    InvitationStatus,
    Membership,
    Org,
    Role,
)
from apps.tenancy.org_context import activate_orgs
from apps.tenancy.services.memberships import acting_role

_SALT = "countersign.tenancy.invitation"
MAIL_KIND = "invitation"


class InvitationClosed(DomainError):
    """The invitation was accepted, revoked or has expired: its link no longer works."""

    status = HTTPStatus.GONE
    code = "invitation_closed"


class InvitationConflict(DomainError):
    status = HTTPStatus.CONFLICT
    code = "conflict"


def invitation_token(invitation: Invitation) -> str:
    """The signed reference a link carries: the id and the current nonce."""
    return signing.dumps([invitation.pk, invitation.nonce], salt=_SALT)


def invitation_link(invitation: Invitation) -> str:
    path = reverse("console-invitation", args=[invitation_token(invitation)])
    return f"{settings.PUBLIC_BASE_URL}{path}"


def _normalized_email(email: str) -> str:
    email = email.strip()
    try:
        validate_email(email)
    except ValidationError:
        raise InvalidInput(f"{email!r} is not an email address") from None
    local, _, domain = email.rpartition("@")
    return f"{local}@{domain.lower()}"


def _check_inviter(*, org: Org, role: Role, actor: Actor) -> None:
    """Owners and managers invite, never to a role above their own; an operator at the
    command line invites to any role."""
    if actor.user is None:
        return
    own = acting_role(actor.user, org)
    if own is None or not own.at_least(Role.MANAGER):
        raise Forbidden(f"inviting members to {org} needs the manager role")
    if not own.at_least(role):
        raise Forbidden(f"a {own.label.lower()} cannot invite to the {role.value} role")


def _lock_org(org: Org) -> None:
    # Every membership change and invitation of one org is serialized (as memberships do).
    Org.objects.select_for_update().filter(pk=org.pk).values_list("pk", flat=True).first()


def _is_member(*, org: Org, email: str) -> bool:
    return Membership.objects.filter(org=org, user__email__iexact=email).exists()


def invitation_create(*, org: Org, email: str, role: str, actor: Actor = OPERATOR) -> Invitation:
    """Invite ``email`` to ``org`` as ``role`` and send the invitation by email."""
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; known: {', '.join(Role.values)}")
    email = _normalized_email(email)
    now = timezone.now()
    with transaction.atomic():
        _lock_org(org)
        _check_inviter(org=org, role=Role(role), actor=actor)
        if _is_member(org=org, email=email):
            raise InvitationConflict(f"{email} is already a member of {org}")
        waiting = Invitation.objects.pending_at(now).filter(org=org, email__iexact=email)
        if waiting.exists():
            raise InvitationConflict(
                f"{email} has a pending invitation to {org}: send it again or revoke it"
            )
        invitation = Invitation.objects.create(
            org=org, email=email, role=role, nonce=get_random_string(32),
            invited_by_id=actor.user_id, inviter=actor.name[:150], sent_at=now,
            link_expires_at=now + timedelta(hours=settings.INVITATION_TTL_HOURS),
        )  # fmt: skip
        org_audit_record(
            org=org, kind=AuditKind.INVITATION_SENT, actor=actor,
            summary=f"{email} invited as {role}",
            detail={"invitation": invitation.pk, "email": email, "role": role,
                    "expires_at": invitation.link_expires_at.isoformat()},
        )  # fmt: skip
        outbound.mail(kind=MAIL_KIND, object_id=invitation.pk)
    return invitation


def _locked_invitation(*, org: Org, invitation_id: int) -> Invitation:
    invitation = Invitation.objects.select_for_update().filter(org=org, pk=invitation_id).first()
    if invitation is None:
        raise NotFound(f"no invitation {invitation_id} in {org}")
    return invitation


def invitation_resend(*, org: Org, invitation_id: int, actor: Actor = OPERATOR) -> Invitation:
    """Send the invitation again with a new link (the previous one stops working) and a
    new expiry; an expired invitation is so revived. Accepted or revoked: refused."""
    now = timezone.now()
    with transaction.atomic():
        _lock_org(org)
        invitation = _locked_invitation(org=org, invitation_id=invitation_id)
        status = invitation.status_at(now)
        if status in (InvitationStatus.ACCEPTED, InvitationStatus.REVOKED):
            raise InvitationClosed(f"the invitation of {invitation.email} was {status.value}")
        _check_inviter(org=org, role=Role(invitation.role), actor=actor)
        invitation.nonce = get_random_string(32)
        invitation.sent_at = now
        invitation.sent_count += 1
        invitation.link_expires_at = now + timedelta(hours=settings.INVITATION_TTL_HOURS)
        invitation.save(update_fields=["nonce", "sent_at", "sent_count", "link_expires_at"])
        org_audit_record(
            org=org, kind=AuditKind.INVITATION_RESENT, actor=actor,
            summary=f"invitation of {invitation.email} sent again",
            detail={"invitation": invitation.pk, "email": invitation.email,
                    "role": invitation.role, "expires_at": invitation.link_expires_at.isoformat(),
                    "was": status.value},
        )  # fmt: skip
        outbound.mail(kind=MAIL_KIND, object_id=invitation.pk)
    return invitation


def invitation_revoke(*, org: Org, invitation_id: int, actor: Actor = OPERATOR) -> Invitation:
    """End the invitation's link for good (pending or expired; accepted: refused)."""
    now = timezone.now()
    with transaction.atomic():
        _lock_org(org)
        invitation = _locked_invitation(org=org, invitation_id=invitation_id)
        status = invitation.status_at(now)
        if status in (InvitationStatus.ACCEPTED, InvitationStatus.REVOKED):
            raise InvitationClosed(f"the invitation of {invitation.email} was {status.value}")
        _check_inviter(org=org, role=Role(invitation.role), actor=actor)
        invitation.revoked_at = now
        invitation.save(update_fields=["revoked_at"])
        org_audit_record(
            org=org, kind=AuditKind.INVITATION_REVOKED, actor=actor,
            summary=f"invitation of {invitation.email} revoked",
            detail={"invitation": invitation.pk, "email": invitation.email,
                    "role": invitation.role},
        )  # fmt: skip
    return invitation


# --- The invitee's side -------------------------------------------------------------------


def _invitation_org_id(invitation_id: int) -> int | None:
    """The org of an invitation, resolved before any org context exists (the invitee is
    not a member yet): on PostgreSQL through the SECURITY DEFINER resolver of tenancy's
    migration 0016. Only ever called with an id from a verified signature."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT mirror_invitation_org(%s)", [invitation_id])
            row = cursor.fetchone()
        return None if row is None or row[0] is None else int(row[0])
    found = Invitation.objects.filter(pk=invitation_id).values_list("org_id", flat=True).first()
    return found


def invitation_from_token(token: str) -> Invitation:
    """The invitation a link names, whatever its state (see :func:`invitation_open`), with
    this connection limited to its org. A forged, altered or superseded link: NotFound."""
    invalid = NotFound("this invitation link is not valid (a newer one may have been sent)")
    try:
        invitation_id, nonce = signing.loads(token, salt=_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        raise invalid from None
    if not isinstance(invitation_id, int) or not isinstance(nonce, str):
        raise invalid
    org_id = _invitation_org_id(invitation_id)
    if org_id is None:
        raise invalid
    activate_orgs([org_id])
    invitation = Invitation.objects.select_related("org").filter(pk=invitation_id).first()
    if invitation is None or not constant_time_compare(invitation.nonce, nonce):
        raise invalid
    return invitation


def invitation_open(token: str) -> Invitation:
    """The pending invitation a link names; closed (accepted, revoked, expired): refused."""
    invitation = invitation_from_token(token)
    status = invitation.status_at(timezone.now())
    if status != InvitationStatus.PENDING:
        raise InvitationClosed(f"this invitation to {invitation.org.name} has {_said(status)}")
    return invitation


def _said(status: InvitationStatus) -> str:
    return {
        InvitationStatus.ACCEPTED: "been accepted already",
        InvitationStatus.REVOKED: "been revoked",
        InvitationStatus.EXPIRED: "expired: ask for a new one",
    }.get(status, status.value)


def account_for_email(email: str) -> AbstractBaseUser | None:
    """The console account an email address names: its username or its email."""
    users = get_user_model()._default_manager
    by_name = users.filter(username__iexact=email).first()
    return by_name if by_name is not None else users.filter(email__iexact=email).first()


@dataclass(frozen=True)
class Accepted:
    invitation: Invitation
    membership: Membership
    created_account: bool


def invitation_accept(
    *, token: str, password: str | None = None, user: AbstractBaseUser | None = None,
    role: Role | None = None,
) -> Accepted:  # fmt: skip
    """Accept the invitation a link names, once.

    Either ``password`` (a new account is made, named by the invited email, with staff
    status so it signs in to the console) or ``user``, an account already signed in (by
    password or by single sign-on), whose email must be the invited one. ``role``: the role
    single sign-on maps, which then wins over the invited one. The inviter must still hold
    the invited role (an invitation never grants more than its inviter has).
    """
    if (password is None) == (user is None):
        raise InvalidInput("accept with a new password or with a signed-in account, not both")
    invitation = invitation_open(token)  # the org context; the state is read again locked
    org = invitation.org
    now = timezone.now()
    with transaction.atomic():
        _lock_org(org)
        invitation = _locked_invitation(org=org, invitation_id=invitation.pk)
        status = invitation.status_at(now)
        if status != InvitationStatus.PENDING:
            raise InvitationClosed(f"this invitation to {org.name} has {_said(status)}")
        if invitation.invited_by_id is not None:
            inviter = get_user_model()._default_manager.filter(pk=invitation.invited_by_id).first()
            if inviter is None or not (
                (held := acting_role(inviter, org)) and held.at_least(Role(invitation.role))
            ):
                raise Forbidden(
                    f"whoever invited you no longer holds the {invitation.role} role in "
                    f"{org.name}: ask for a new invitation"
                )
        created = False
        if user is None:
            if account_for_email(invitation.email) is not None:
                raise InvitationConflict(
                    f"an account for {invitation.email} exists: sign in to it first, then "
                    "open the invitation link again"
                )
            user_model = get_user_model()
            user = user_model(
                **{user_model.USERNAME_FIELD: invitation.email},
                email=invitation.email, is_staff=True,
            )  # fmt: skip
            user.set_password(password)
            user.save()
            created = True
        elif (getattr(user, "email", "") or "").lower() != invitation.email.lower():
            raise Forbidden(
                f"this invitation is for {invitation.email}; you are signed in as "
                f"{user.get_username()}"
            )
        granted = Role(invitation.role) if role is None else role
        actor = Actor.console(user)
        membership = Membership.objects.filter(org=org, user_id=user.pk).first()
        if membership is None:
            membership = Membership.objects.create(org=org, user_id=user.pk, role=granted)
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ADDED, actor=actor,
                summary=f"{user.get_username()} added as {granted.value} by invitation",
                detail={"username": user.get_username(), "role": granted.value,
                        "invitation": invitation.pk},
            )  # fmt: skip
        invitation.accepted_at = now
        invitation.accepted_by = user  # type: ignore[assignment]
        invitation.save(update_fields=["accepted_at", "accepted_by"])
        org_audit_record(
            org=org, kind=AuditKind.INVITATION_ACCEPTED, actor=actor,
            summary=f"{invitation.email} accepted the invitation as {membership.role}",
            detail={"invitation": invitation.pk, "email": invitation.email,
                    "role": membership.role, "new_account": created},
        )  # fmt: skip
    return Accepted(invitation=invitation, membership=membership, created_account=created)
