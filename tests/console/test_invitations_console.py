"""Invitations in the console: "Memberships → add" sends one (and says so), the invitation
list sends again and revokes, and the invitee's page sets a password with Django's own form
and lands in the org's console, also in Chromium, and with the production org context."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from apps.tenancy.models import AuditKind, Invitation, Membership, OrgAuditEvent
from apps.tenancy.org_context import activate_all_orgs, activate_default
from apps.tenancy.services import invitation_create
from tests.tenancy.invitation_helpers import link_sent_to, path_of, send_queued_invitations

PASSWORD = "correct horse battery 9"


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def messages_of(response: Any) -> str:
    return " ".join(str(message) for message in response.context["messages"])


@pytest.mark.django_db
def test_adding_a_member_sends_an_invitation_and_says_so(cast):
    answer = member("manager").post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "dana@acme.example", "role": "auditor"},
        follow=True,
    )
    assert answer.status_code == HTTPStatus.OK
    said = messages_of(answer)
    assert "Invitation sent to dana@acme.example to join acme as auditor" in said
    assert "They become a member when they accept it" in said
    assert answer.redirect_chain[-1][0] == "/admin/tenancy/invitation/"
    assert not get_user_model().objects.filter(email="dana@acme.example").exists()
    assert link_sent_to("dana@acme.example")
    sent = OrgAuditEvent.objects.get(kind=AuditKind.INVITATION_SENT)
    assert (sent.actor, sent.via) == ("acme-manager", "console")


@pytest.mark.django_db
def test_the_add_form_refuses_a_role_above_the_managers_own(cast):
    answer = member("manager").post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "mallory@x.example", "role": "owner"},
        follow=True,
    )
    assert "a manager cannot invite to the owner role" in messages_of(answer)
    assert not Invitation.objects.exists()


@pytest.mark.django_db
def test_the_invitation_list_sends_again_and_revokes(cast):
    invitation = invitation_create(org=cast.acme, email="e@x.example", role="viewer")
    first = link_sent_to("e@x.example")
    manager = member("manager")
    listing = manager.get("/admin/tenancy/invitation/")
    assert "e@x.example" in listing.content.decode()
    assert "Pending" in listing.content.decode()
    manager.post("/admin/tenancy/invitation/",
                 {"action": "resend_selected", "_selected_action": [invitation.pk]})  # fmt: skip
    assert link_sent_to("e@x.example") != first
    answer = manager.post(
        "/admin/tenancy/invitation/",
        {"action": "revoke_selected", "_selected_action": [invitation.pk]},
        follow=True,
    )
    assert "Revoked 1 invitation(s)." in messages_of(answer)
    assert Invitation.objects.get().revoked_at is not None
    assert member("viewer").get("/admin/tenancy/invitation/add/").status_code == 403


@pytest.mark.django_db
def test_the_invitee_sets_a_password_and_lands_in_the_org(cast, settings):
    invitation_create(org=cast.acme, email="dana@acme.example", role="auditor")
    link = link_sent_to("dana@acme.example")
    # As in production: a request outside the console starts with no org's rows visible.
    settings.ORG_CONTEXT_DEFAULT = "none"
    activate_default()
    invitee = Client()
    page = invitee.get(path_of(link))
    assert page.status_code == HTTPStatus.OK
    assert page["Cache-Control"] == "no-store"
    assert page["Referrer-Policy"] == "same-origin"
    body = page.content.decode()
    assert "Join Acme" in body
    assert 'name="new_password1"' in body
    assert 'name="new_password2"' in body
    mismatch = invitee.post(path_of(link), {"action": "password", "new_password1": PASSWORD,
                                            "new_password2": PASSWORD + "x"})  # fmt: skip
    assert mismatch.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "didn\u2019t match" in mismatch.content.decode()
    weak = invitee.post(path_of(link), {"action": "password", "new_password1": "123",
                                        "new_password2": "123"})  # fmt: skip
    assert weak.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    done = invitee.post(path_of(link), {"action": "password", "new_password1": PASSWORD,
                                        "new_password2": PASSWORD})  # fmt: skip
    assert done.status_code == HTTPStatus.FOUND
    assert done["Location"] == f"/admin/tenancy/org/{cast.acme.pk}/dashboard/"
    dashboard = invitee.get(done["Location"])
    assert dashboard.status_code == HTTPStatus.OK
    again = Client().get(path_of(link))
    assert again.status_code == HTTPStatus.GONE
    assert "accepted already" in again.content.decode()
    activate_all_orgs()
    assert Membership.objects.get(user__email="dana@acme.example").role == "auditor"


@pytest.mark.django_db
def test_a_signed_in_account_joins_with_one_press(cast):
    accounts = get_user_model().objects
    accounts.create_user("gina", email="gina@globex.example", password="pw", is_staff=True)
    invitation_create(org=cast.acme, email="gina@globex.example", role="viewer")
    link = path_of(link_sent_to("gina@globex.example"))
    anonymous = Client().get(link).content.decode()
    assert "An account for gina@globex.example exists" in anonymous
    assert 'name="new_password1"' not in anonymous
    gina = Client()
    assert gina.login(username="gina", password="pw")
    assert gina.post(link, {"action": "join"}).status_code == HTTPStatus.FOUND
    assert Membership.objects.get(user__username="gina", org=cast.acme).role == "viewer"


@pytest.mark.django_db
def test_a_mangled_link_is_a_page_not_an_error(cast):
    answer = Client().get("/invitations/not-a-token")
    assert answer.status_code == HTTPStatus.NOT_FOUND
    assert "not valid" in answer.content.decode()


@pytest.mark.django_db(transaction=True)
def test_an_invitation_is_accepted_end_to_end_in_the_browser(cast, page, live_server):
    invitation_create(org=cast.acme, email="erin@acme.example", role="viewer")
    assert send_queued_invitations() == 1
    link = link_sent_to("erin@acme.example")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(live_server.url + path_of(link))
    page.fill("#id_new_password1", PASSWORD)
    page.fill("#id_new_password2", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/admin/tenancy/org/*/dashboard/")
    assert "Acme" in page.content()
    assert mail.outbox[-1].to == ["erin@acme.example"]
