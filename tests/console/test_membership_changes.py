"""The console's membership pages (add form, change form, delete page) go through the one
service rule: no role above the member's own is granted, changed or removed, the last
owner stays, and a refusal leaves no row and no admin log entry."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.test import Client

from apps.tenancy.models import Membership

pytestmark = pytest.mark.django_db


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def membership(username: str) -> Membership:
    return Membership.objects.get(user__username=username)


def messages_of(response) -> str:
    return " ".join(str(message) for message in response.context["messages"])


def test_the_add_form_cannot_overwrite_a_member(cast):
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username="acme-owner").update(email="owner@acme.example")
    answer = member("manager").post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "owner@acme.example", "role": "viewer"},
        follow=True,
    )
    assert "owner@acme.example is already a member of acme" in messages_of(answer)
    assert membership("acme-owner").role == "owner"
    assert not LogEntry.objects.filter(user__username="acme-manager").exists()


def test_the_last_owner_cannot_demote_themselves_in_the_change_form(cast):
    owner = membership("acme-owner")
    answer = member("owner").post(
        f"/admin/tenancy/membership/{owner.pk}/change/", {"role": "manager"}, follow=True
    )
    assert "acme-owner is the last owner of acme" in messages_of(answer)
    assert membership("acme-owner").role == "owner"
    assert not LogEntry.objects.filter(user__username="acme-owner").exists()


def test_an_owner_removes_a_manager_on_the_delete_page(cast):
    manager = membership("acme-manager")
    page = f"/admin/tenancy/membership/{manager.pk}/delete/"
    owner = member("owner")
    assert owner.get(page).status_code == HTTPStatus.OK
    answer = owner.post(page, {"post": "yes"})
    assert answer.status_code == HTTPStatus.FOUND
    assert not Membership.objects.filter(pk=manager.pk).exists()
    assert LogEntry.objects.filter(user__username="acme-owner", action_flag=DELETION).exists()


def test_a_manager_cannot_remove_an_owner_and_nothing_is_logged(cast):
    owner = membership("acme-owner")
    answer = member("manager").post(
        f"/admin/tenancy/membership/{owner.pk}/delete/", {"post": "yes"}, follow=True
    )
    assert "a manager cannot remove an owner" in messages_of(answer)
    assert Membership.objects.filter(pk=owner.pk).exists()
    assert not LogEntry.objects.filter(action_flag=DELETION).exists()


def test_the_last_owner_cannot_be_removed_on_the_delete_page(cast):
    owner = membership("acme-owner")
    answer = member("owner").post(
        f"/admin/tenancy/membership/{owner.pk}/delete/", {"post": "yes"}, follow=True
    )
    assert "cannot be removed" in messages_of(answer)
    assert Membership.objects.filter(pk=owner.pk).exists()
    assert not LogEntry.objects.filter(action_flag=DELETION).exists()


@pytest.mark.parametrize("role", ["viewer", "auditor"])
def test_below_manager_the_delete_page_is_closed(cast, role):
    target = membership("acme-viewer")
    answer = member(role).get(f"/admin/tenancy/membership/{target.pk}/delete/")
    assert answer.status_code == HTTPStatus.FORBIDDEN


def test_no_bulk_delete_action_is_offered(cast):
    page = member("owner").get("/admin/tenancy/membership/")
    assert page.status_code == HTTPStatus.OK
    assert "delete_selected" not in page.content.decode()
