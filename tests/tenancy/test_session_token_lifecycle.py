"""Dashboard session tokens: never cached, refresh tokens spent by their one use (a second
use is refused and ends the user's session), a password change or a deactivation ends every
live token of the user, access tokens included, and a membership removal those of its org
(tests/tenancy/test_membership_consent.py: the user's tokens for other orgs live on)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient
from rest_framework_simplejwt.token_blacklist.models import BlacklistedToken, OutstandingToken

from apps.tenancy.audit_trail import Actor
from apps.tenancy.console_tokens import ConsoleTokens, console_tokens_issue
from apps.tenancy.models import Role
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import membership_add, membership_remove

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tenancy.urls")]

REFRESH = "/v1/console/token/refresh"
PROBE = "/v1/dashboard-probe"


def user(name: str = "acme-auditor") -> Any:
    return get_user_model().objects.get(username=name)


def issue(name: str = "acme-auditor", org: str = "acme") -> ConsoleTokens:
    tokens = console_tokens_issue(user=user(name), org_slug=org)
    activate_default()  # issuing opened the org's context; test code sees every org
    return tokens


def probe(access: str) -> int:
    return APIClient().get(PROBE, HTTP_AUTHORIZATION=f"Bearer {access}").status_code


def refresh(token: str) -> Any:
    return APIClient().post(REFRESH, {"refresh": token}, format="json")


def assert_ended(tokens: ConsoleTokens) -> None:
    assert probe(tokens.access) == HTTPStatus.UNAUTHORIZED
    answer = refresh(tokens.refresh)
    assert answer.status_code == HTTPStatus.UNAUTHORIZED
    assert set(answer.json()) == {"detail"}


# --- no-store ------------------------------------------------------------------------------------


def test_obtaining_a_pair_answers_no_store(cast):
    client = Client()
    client.force_login(user())
    answer = client.post("/v1/console/token", {"org": "acme"}, content_type="application/json")
    assert answer.status_code == HTTPStatus.OK
    assert answer["Cache-Control"] == "no-store"
    refused = client.post("/v1/console/token", {"org": "globex"}, content_type="application/json")
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert refused["Cache-Control"] == "no-store"


def test_refreshing_answers_no_store_refusals_included(cast):
    answer = refresh(issue().refresh)
    assert answer.status_code == HTTPStatus.OK
    assert answer["Cache-Control"] == "no-store"
    assert refresh("x.y.z")["Cache-Control"] == "no-store"


# --- rotation and reuse -------------------------------------------------------------------------


def test_refreshing_rotates_the_refresh_token(cast):
    first = issue()
    answer = refresh(first.refresh)
    assert answer.status_code == HTTPStatus.OK
    second = answer.json()
    assert second["refresh"] != first.refresh
    assert probe(second["access"]) == HTTPStatus.OK
    assert refresh(second["refresh"]).status_code == HTTPStatus.OK
    assert BlacklistedToken.objects.count() == 2  # both spent tokens


def test_a_spent_refresh_token_is_refused_and_ends_the_users_session(cast, caplog):
    first = issue()
    second = refresh(first.refresh).json()
    caplog.set_level(logging.WARNING, logger="apps.tenancy.console_tokens")
    reused = refresh(first.refresh)
    assert reused.status_code == HTTPStatus.UNAUTHORIZED
    assert "used already" in reused.json()["detail"]
    # Whoever holds the rotated pair (the thief or the user) holds nothing now.
    assert probe(second["access"]) == HTTPStatus.UNAUTHORIZED
    assert refresh(second["refresh"]).status_code == HTTPStatus.UNAUTHORIZED
    assert [r.levelno for r in caplog.records if "spent" in r.getMessage()] == [logging.WARNING]
    # Signing in again gives a working pair.
    assert probe(issue().access) == HTTPStatus.OK


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_refreshes_racing_with_one_token_spend_it_once_and_end_the_session(cast):
    token = issue().refresh

    def use(_: int) -> Any:
        try:
            return refresh(token)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(use, range(4)))
    statuses = [answer.status_code for answer in answers]
    assert statuses.count(HTTPStatus.OK) <= 1
    assert statuses.count(HTTPStatus.UNAUTHORIZED) >= 3
    assert BlacklistedToken.objects.count() == 1
    # The reuse was seen: whatever pair the race handed out is dead already.
    for answer in answers:
        if answer.status_code == HTTPStatus.OK:
            assert probe(answer.json()["access"]) == HTTPStatus.UNAUTHORIZED


def test_an_access_token_is_not_a_refresh_token(cast):
    assert refresh(issue().access).status_code == HTTPStatus.UNAUTHORIZED


def test_issued_refresh_tokens_are_recorded_as_outstanding(cast):
    issue()
    assert OutstandingToken.objects.filter(user=user()).count() == 1


# --- ending a user's session tokens -------------------------------------------------------------


def test_a_password_change_ends_access_and_refresh_tokens(cast):
    tokens = issue()
    account = user()
    account.set_password("a-new-password")
    account.save()
    assert_ended(tokens)
    assert probe(issue().access) == HTTPStatus.OK


def test_a_password_changed_in_the_console_ends_them_too(cast):
    tokens = issue()
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(root)
    answer = client.post(
        f"/admin/auth/user/{user().pk}/password/",
        {"password1": "Correct-Horse-9", "password2": "Correct-Horse-9"},
    )
    assert answer.status_code == HTTPStatus.FOUND
    assert_ended(tokens)


def test_a_password_set_by_add_member_ends_them(cast):
    tokens = issue()
    membership_add(org=cast.acme, username="acme-auditor", role=Role.AUDITOR, password="other")
    assert_ended(tokens)


def test_a_deactivation_ends_them_and_reactivating_does_not_revive_them(cast):
    tokens = issue()
    account = user()
    account.is_active = False
    account.save()
    assert_ended(tokens)
    account.is_active = True
    account.save()
    assert_ended(tokens)
    assert probe(issue().access) == HTTPStatus.OK


def test_a_membership_removal_ends_them_and_re_adding_does_not_revive_them(cast):
    tokens = issue()
    membership_remove(
        org=cast.acme, username="acme-auditor", actor=Actor.console(user("acme-owner"))
    )
    assert_ended(tokens)
    membership_add(org=cast.acme, username="acme-auditor", role=Role.AUDITOR)
    assert_ended(tokens)
    assert probe(issue().access) == HTTPStatus.OK


def test_signing_in_or_a_role_change_keeps_the_session(cast):
    tokens = issue("acme-manager")
    client = Client()
    assert (
        client.post(
            "/admin/login/", {"username": "acme-manager", "password": "pw-manager"}
        ).status_code
        == HTTPStatus.FOUND
    )  # saves last_login, nothing else
    membership_add(org=cast.acme, username="acme-manager", role=Role.AUDITOR)
    account = user("acme-manager")
    account.first_name = "Dana"
    account.save()
    assert probe(tokens.access) == HTTPStatus.OK
    assert refresh(tokens.refresh).json()["role"] == "auditor"


def test_another_users_tokens_live_on(cast):
    other = issue("acme-owner")
    account = user()
    account.set_password("a-new-password")
    account.save()
    assert probe(other.access) == HTTPStatus.OK
    assert refresh(other.refresh).status_code == HTTPStatus.OK
