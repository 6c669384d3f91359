"""Invitations: sent by an owner or manager (never above their own role) or an operator's
command, accepted once through the emailed link, sent again, revoked, expired; each step is
in the org's audit trail."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core import mail, signing
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.utils import timezone

from apps.common.errors import Forbidden, NotFound
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import AuditKind, Invitation, Membership, OrgAuditEvent, Role
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import (
    InvitationClosed,
    InvitationConflict,
    invitation_accept,
    invitation_create,
    invitation_link,
    invitation_open,
    invitation_resend,
    invitation_revoke,
    membership_add,
)
from apps.tenancy.services.invitations import _SALT, invitation_token
from tests.tenancy.invitation_helpers import link_sent_to, send_queued_invitations

pytestmark = pytest.mark.django_db


def console(username: str) -> Actor:
    return Actor.console(get_user_model().objects.get(username=username))


def token_of(link: str) -> str:
    return link.rsplit("/", 1)[1]


def audit_kinds(org) -> list[str]:
    return list(
        OrgAuditEvent.objects.filter(org=org).order_by("at", "id").values_list("kind", flat=True)
    )


def test_an_invitation_is_emailed_with_a_link_that_makes_a_member_once(cast):
    invitation = invitation_create(
        org=cast.acme, email="Dana@ACME.example", role="auditor", actor=console("acme-manager")
    )
    assert invitation.email == "Dana@acme.example"  # the domain folded, the local part kept
    link = link_sent_to("Dana@acme.example")
    [message] = mail.outbox
    assert "acme-manager invited you" in message.subject
    assert "as auditor" in message.body
    accepted = invitation_accept(token=token_of(link), password="a long new passphrase 7")
    user = accepted.membership.user
    assert (user.get_username(), user.email, user.is_staff) == (
        "Dana@acme.example", "Dana@acme.example", True,
    )  # fmt: skip
    assert user.check_password("a long new passphrase 7")
    assert Membership.objects.get(org=cast.acme, user=user).role == "auditor"
    with pytest.raises(InvitationClosed, match="accepted already"):
        invitation_accept(token=token_of(link), password="another passphrase 8")
    assert audit_kinds(cast.acme)[-3:] == [
        AuditKind.INVITATION_SENT, AuditKind.MEMBERSHIP_ADDED, AuditKind.INVITATION_ACCEPTED,
    ]  # fmt: skip
    accepted_row = OrgAuditEvent.objects.get(kind=AuditKind.INVITATION_ACCEPTED)
    assert (accepted_row.actor, accepted_row.via) == ("Dana@acme.example", "console")


def test_nobody_invites_above_their_own_role_and_viewers_do_not_invite(cast):
    with pytest.raises(Forbidden, match="a manager cannot invite to the owner role"):
        invitation_create(org=cast.acme, email="m@x.example", role="owner",
                          actor=console("acme-manager"))  # fmt: skip
    with pytest.raises(Forbidden, match="needs the manager role"):
        invitation_create(org=cast.acme, email="m@x.example", role="viewer",
                          actor=console("acme-auditor"))  # fmt: skip
    with pytest.raises(Forbidden, match="needs the manager role"):  # not a member of globex
        invitation_create(org=cast.globex, email="m@x.example", role="viewer",
                          actor=console("acme-owner"))  # fmt: skip
    invitation_create(org=cast.acme, email="o@x.example", role="owner", actor=console("acme-owner"))
    assert not Invitation.objects.filter(email="m@x.example").exists()


def test_a_demoted_inviter_no_longer_grants_the_invited_role(cast):
    invitation = invitation_create(org=cast.acme, email="e@x.example", role="manager",
                                   actor=console("acme-manager"))  # fmt: skip
    membership_add(org=cast.acme, username="acme-manager", role="viewer")
    with pytest.raises(Forbidden, match="no longer holds the manager role"):
        invitation_accept(token=invitation_token(invitation), password="a long new passphrase 7")
    assert not Membership.objects.filter(user__username="e@x.example").exists()


def test_sending_again_ends_the_previous_link_and_revives_an_expired_one(cast):
    invitation = invitation_create(org=cast.acme, email="f@x.example", role="viewer")
    first = link_sent_to("f@x.example")
    Invitation.objects.filter(pk=invitation.pk).update(link_expires_at=timezone.now())
    with pytest.raises(InvitationClosed, match="expired"):
        invitation_open(token_of(first))
    invitation_resend(org=cast.acme, invitation_id=invitation.pk, actor=console("acme-manager"))
    second = link_sent_to("f@x.example")
    assert second != first
    with pytest.raises(NotFound, match="not valid"):
        invitation_open(token_of(first))
    assert invitation_open(token_of(second)).pk == invitation.pk
    resent = OrgAuditEvent.objects.get(kind=AuditKind.INVITATION_RESENT)
    assert (resent.actor, resent.detail["was"]) == ("acme-manager", "expired")


def test_a_revoked_invitation_is_not_sent_and_its_link_is_refused(cast):
    invitation = invitation_create(org=cast.acme, email="g@x.example", role="viewer")
    link = invitation_link(invitation)
    invitation_revoke(org=cast.acme, invitation_id=invitation.pk, actor=console("acme-owner"))
    assert send_queued_invitations() == 0  # revoked before the worker came to it
    with pytest.raises(InvitationClosed, match="revoked"):
        invitation_accept(token=token_of(link), password="a long new passphrase 7")
    with pytest.raises(InvitationClosed):
        invitation_resend(org=cast.acme, invitation_id=invitation.pk)
    assert AuditKind.INVITATION_REVOKED in audit_kinds(cast.acme)


def test_a_forged_or_altered_link_is_refused(cast):
    invitation = invitation_create(org=cast.acme, email="h@x.example", role="viewer")
    token = invitation_token(invitation)
    other_salt = signing.dumps([invitation.pk, invitation.nonce], salt="another purpose")
    other_nonce = signing.dumps([invitation.pk, "n" * 32], salt=_SALT)
    for bad in ("nothing", token[:-2] + "xx", other_salt, other_nonce):
        with pytest.raises(NotFound):
            invitation_open(bad)


def test_one_pending_invitation_per_address_and_none_for_members(cast):
    get_user_model().objects.filter(username="acme-viewer").update(email="v@acme.example")
    with pytest.raises(InvitationConflict, match="already a member"):
        invitation_create(org=cast.acme, email="v@acme.example", role="auditor")
    invitation_create(org=cast.acme, email="i@x.example", role="viewer")
    with pytest.raises(InvitationConflict, match="pending invitation"):
        invitation_create(org=cast.acme, email="I@X.example", role="viewer")
    invitation_create(org=cast.globex, email="i@x.example", role="viewer")  # another org


def test_an_existing_account_joins_signed_in_with_its_own_email_only(cast):
    accounts = get_user_model().objects
    accounts.create_user("gina", email="gina@globex.example", password="pw", is_staff=True)
    membership_add(org=cast.globex, username="gina", role="owner")
    invitation = invitation_create(org=cast.acme, email="gina@globex.example", role="viewer")
    token = invitation_token(invitation)
    with pytest.raises(InvitationConflict, match="sign in to it first"):
        invitation_accept(token=token, password="a long new passphrase 7")
    with pytest.raises(Forbidden, match=r"this invitation is for gina@globex\.example"):
        invitation_accept(token=token, user=accounts.get(username="acme-viewer"))
    accepted = invitation_accept(token=token, user=accounts.get(username="gina"))
    assert accepted.membership.role == "viewer"
    assert not accepted.created_account
    activate_default()  # reading the link limited the connection to acme, as for a request
    assert Membership.objects.get(org=cast.globex, user__username="gina").role == "owner"


def test_a_refused_acceptance_leaves_nothing_behind(cast):
    invitation = invitation_create(org=cast.acme, email="j@x.example", role="viewer")
    token = invitation_token(invitation)

    def accept_then_fail() -> None:
        with transaction.atomic():
            invitation_accept(token=token, password="a long new passphrase 7")
            raise RuntimeError("the request failed after the service")

    with pytest.raises(RuntimeError):
        accept_then_fail()
    assert not get_user_model().objects.filter(username="j@x.example").exists()
    assert invitation_open(invitation_token(invitation)).accepted_at is None


def test_invite_member_prints_the_link_as_its_last_line(cast):
    out = StringIO()
    call_command("invite_member", "acme", "k@x.example", "--role", "manager",
                 "--actor", "ops", stdout=out)  # fmt: skip
    link = out.getvalue().splitlines()[-1]
    invitation = invitation_open(token_of(link))
    assert (invitation.email, invitation.role, invitation.inviter) == (
        "k@x.example",
        "manager",
        "ops",
    )
    assert link.startswith("http")
    assert "/invitations/" in link
    with pytest.raises(CommandError, match="pending invitation"):
        call_command("invite_member", "acme", "k@x.example", "--role", "viewer", stdout=StringIO())
    assert invitation.link_expires_at - invitation.sent_at == timedelta(hours=72)


def test_roles_are_compared_through_the_ordering_helper():
    # The top role grants everything below it: a new top role slots in above the others.
    top = list(Role)[-1]
    assert all(top.at_least(role) for role in Role)
