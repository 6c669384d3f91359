"""An existing account joins an org only with a superuser's or its own consent, adding
never changes an account's staff or superuser flags, and a removal ends only the session
tokens the org granted: a manager of one org cannot add another org's user to end that
user's sessions everywhere."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from apps.common.errors import Forbidden
from apps.tenancy.audit_trail import Actor
from apps.tenancy.console_tokens import ConsoleTokens, console_tokens_issue
from apps.tenancy.models import Membership, OrgAuditEvent, Role
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import membership_add, membership_remove

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tenancy.urls")]

REFRESH = "/v1/console/token/refresh"
PROBE = "/v1/dashboard-probe"


def user(name: str) -> Any:
    return get_user_model().objects.get(username=name)


@pytest.fixture
def globex_user(cast: Any) -> Any:
    membership_add(org=cast.globex, username="gina", role=Role.AUDITOR, password="pw-gina")
    return user("gina")


def issue(name: str, org: str) -> ConsoleTokens:
    tokens = console_tokens_issue(user=user(name), org_slug=org)
    activate_default()  # issuing opened the org's context; test code sees every org
    return tokens


def probe(access: str) -> int:
    return APIClient().get(PROBE, HTTP_AUTHORIZATION=f"Bearer {access}").status_code


def refresh(token: str) -> int:
    return APIClient().post(REFRESH, {"refresh": token}, format="json").status_code


def acme_trail() -> list[str]:
    return list(OrgAuditEvent.objects.filter(org__slug="acme").values_list("kind", flat=True))


def test_a_manager_cannot_add_another_orgs_user_and_nothing_is_written(cast, globex_user):
    trail = acme_trail()
    with pytest.raises(Forbidden, match="gina already has an account"):
        membership_add(
            org=cast.acme,
            username="gina",
            role=Role.VIEWER,
            actor=Actor.console(user("acme-manager")),
        )
    assert not Membership.objects.filter(org=cast.acme, user=globex_user).exists()
    assert acme_trail() == trail
    assert probe(issue("gina", "globex").access) == HTTPStatus.OK
    # A new account, and a role change inside the manager's own org, stay theirs to make.
    manager = Actor.console(user("acme-manager"))
    membership_add(org=cast.acme, username="newbie", role=Role.VIEWER, actor=manager)
    membership_add(org=cast.acme, username="newbie", role=Role.AUDITOR, actor=manager)
    assert Membership.objects.get(org=cast.acme, user__username="newbie").role == "auditor"
    assert user("newbie").is_staff


def test_an_owner_cannot_add_an_existing_account_either(cast, globex_user):
    with pytest.raises(Forbidden, match="already has an account"):
        membership_add(
            org=cast.acme,
            username="gina",
            role=Role.VIEWER,
            actor=Actor.console(user("acme-owner")),
        )


def test_the_console_form_invites_it_and_it_joins_only_by_accepting(cast, globex_user):
    get_user_model().objects.filter(pk=globex_user.pk).update(email="gina@globex.example")
    client = Client()
    client.force_login(user("acme-manager"))
    page = client.post(
        "/admin/tenancy/membership/add/",
        {"org": cast.acme.pk, "email": "gina@globex.example", "role": "viewer"},
        follow=True,
    )
    assert page.status_code == HTTPStatus.OK
    shown = [str(message) for message in page.context["messages"]]
    assert any("Invitation sent to gina@globex.example" in message for message in shown), shown
    assert not Membership.objects.filter(org=cast.acme, user=globex_user).exists()


def test_a_superuser_adds_an_existing_account_and_its_flags_stay_as_they_are(cast):
    accounts = get_user_model().objects
    accounts.create_user("offline-root", is_superuser=True, is_staff=False)
    accounts.create_user("plain", is_staff=False)
    root = accounts.create_superuser("root", "root@example.com", "pw")
    membership_add(
        org=cast.acme, username="offline-root", role=Role.VIEWER, actor=Actor.console(root)
    )
    membership_add(org=cast.acme, username="plain", role=Role.VIEWER)  # an operator's command
    membership_add(org=cast.globex, username="root", role=Role.OWNER)
    assert (user("offline-root").is_staff, user("offline-root").is_superuser) == (False, True)
    assert (user("plain").is_staff, user("plain").is_superuser) == (False, False)
    assert (user("root").is_staff, user("root").is_superuser) == (True, True)
    assert Membership.objects.get(org=cast.acme, user__username="offline-root").role == "viewer"


def test_a_removal_ends_that_orgs_tokens_and_keeps_the_other_orgs(cast, globex_user):
    membership_add(org=cast.acme, username="gina", role=Role.AUDITOR)  # an operator
    in_acme, in_globex = issue("gina", "acme"), issue("gina", "globex")
    membership_remove(org=cast.acme, username="gina", actor=Actor.console(user("acme-manager")))
    assert probe(in_acme.access) == HTTPStatus.UNAUTHORIZED
    assert refresh(in_acme.refresh) == HTTPStatus.UNAUTHORIZED
    assert probe(in_globex.access) == HTTPStatus.OK
    assert refresh(in_globex.refresh) == HTTPStatus.OK
    # Joining again starts a new grant: the ended tokens stay ended.
    membership_add(org=cast.acme, username="gina", role=Role.AUDITOR)
    assert probe(in_acme.access) == HTTPStatus.UNAUTHORIZED
    assert probe(issue("gina", "acme").access) == HTTPStatus.OK
