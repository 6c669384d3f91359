"""The console's sign-in is throttled per client address and per username: past either
limit, 429 with Retry-After before the password is hashed, the lockout logged once as a
WARNING line; successful sign-ins are not counted."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import forms as auth_forms
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.failure_limits import FakeTime, arm_failure_limits

pytestmark = pytest.mark.django_db

PER_ADDRESS = 4
PER_USERNAME = 2
WINDOW = 600
LOGIN = "/admin/login/"


@pytest.fixture
def limits(settings: Any, monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    return arm_failure_limits(
        settings, monkeypatch, per_address=PER_ADDRESS, per_username=PER_USERNAME, window=WINDOW
    )


@pytest.fixture
def password_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Usernames passed to the login form's ``authenticate`` (where the hashing happens)."""
    seen: list[str] = []
    real = auth_forms.authenticate

    def counting(request: Any = None, **credentials: Any) -> Any:
        seen.append(credentials.get("username", ""))
        return real(request, **credentials)

    monkeypatch.setattr(auth_forms, "authenticate", counting)
    return seen


def sign_in(username: str, password: str, address: str = "198.51.100.7") -> Any:
    return Client(REMOTE_ADDR=address).post(LOGIN, {"username": username, "password": password})


def signed_in(response: Any) -> bool:
    return response.status_code == HTTPStatus.FOUND and "_auth_user_id" in response.client.session


def test_wrong_passwords_then_the_right_one_from_one_address_is_429(cast, limits, password_checks):
    for index in range(PER_ADDRESS):  # different usernames: only the address limit applies
        assert sign_in(f"guess-{index}", "wrong").status_code == HTTPStatus.OK
    refused = sign_in("acme-owner", "pw-owner")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert 1 <= int(refused["Retry-After"]) <= WINDOW + 1
    assert "Too many failed sign-ins" in refused.content.decode()
    assert "no-store" in refused["Cache-Control"]
    assert "_auth_user_id" not in refused.client.session
    assert "acme-owner" not in password_checks  # refused before the password was hashed
    assert signed_in(sign_in("acme-owner", "pw-owner", address="203.0.113.50"))


def test_a_refused_sign_in_runs_no_query(cast, limits):
    for index in range(PER_ADDRESS):
        sign_in(f"guess-{index}", "wrong")
    with CaptureQueriesContext(connection) as queries:
        assert sign_in("acme-owner", "pw-owner").status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert [q["sql"] for q in queries.captured_queries] == []


def test_wrong_passwords_for_one_username_lock_it_from_every_address(cast, limits):
    for index in range(PER_USERNAME):
        assert sign_in("acme-owner", "wrong", address=f"203.0.113.{index + 1}").status_code == 200
    refused = sign_in("acme-owner", "pw-owner", address="192.0.2.99")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    # Another username from those addresses still signs in.
    assert signed_in(sign_in("acme-viewer", "pw-viewer", address="203.0.113.1"))


def test_successful_sign_ins_are_not_counted(cast, limits):
    for _ in range(PER_ADDRESS + PER_USERNAME):
        assert signed_in(sign_in("acme-owner", "pw-owner"))


def test_the_lockout_ends_when_its_window_does(cast, limits):
    for _ in range(PER_USERNAME):
        sign_in("acme-owner", "wrong")
    refused = sign_in("acme-owner", "pw-owner")
    assert refused.status_code == HTTPStatus.TOO_MANY_REQUESTS
    limits.now += int(refused["Retry-After"])
    assert signed_in(sign_in("acme-owner", "pw-owner"))


def test_each_lockout_is_one_warning_line_without_a_traceback(cast, limits, caplog):
    caplog.set_level(logging.WARNING, logger="apps.tenancy.credential_limits")
    for _ in range(PER_ADDRESS + 2):
        sign_in("acme-owner", "wrong")
    lines = [r for r in caplog.records if r.name == "apps.tenancy.credential_limits"]
    # The username's limit (2) is reached first, then nothing more is counted: one line.
    assert [r.levelno for r in lines] == [logging.WARNING]
    assert lines[0].exc_info is None
    assert "console username 'acme-owner'" in lines[0].getMessage()


def test_the_sign_in_page_itself_is_never_refused(cast, limits):
    for index in range(PER_ADDRESS):
        sign_in(f"guess-{index}", "wrong")
    assert Client(REMOTE_ADDR="198.51.100.7").get(LOGIN).status_code == HTTPStatus.OK


def test_failed_api_keys_count_against_the_same_address(cast, limits):
    from rest_framework.test import APIClient

    client = APIClient(REMOTE_ADDR="198.51.100.7")
    for _ in range(PER_ADDRESS):
        client.get("/v1/policy/pull", HTTP_X_API_KEY="hk_000000000000_guess")
    assert sign_in("acme-owner", "pw-owner").status_code == HTTPStatus.TOO_MANY_REQUESTS


# What the sign-in form authenticates: the username stripped (as Django's form field does)
# and NFKC-normalized (as the user model does). Authentication is case-sensitive, so case
# is a different username, not a variant.
VARIANTS = ["acme-owner ", " acme-owner", "acme-owner\t", "acme-owner\n", "\u00a0acme-owner",
            "\r\nacme-owner \t", "\uff41\uff43\uff4d\uff45-owner"]  # fmt: skip


@pytest.mark.parametrize("variant", VARIANTS, ids=repr)
def test_whitespace_and_width_variants_of_a_username_share_its_budget(cast, limits, variant):
    assert sign_in("acme-owner", "wrong", address="203.0.113.1").status_code == HTTPStatus.OK
    assert sign_in(variant, "wrong", address="203.0.113.2").status_code == HTTPStatus.OK
    # The account is locked whichever spelling comes next, the variant's included.
    assert sign_in(variant, "pw-owner", address="203.0.113.3").status_code == 429
    assert sign_in("acme-owner", "pw-owner", address="203.0.113.4").status_code == 429
    assert sign_in(VARIANTS[0], "pw-owner", address="203.0.113.5").status_code == 429
    # Case is not folded (authentication is case-sensitive): another username, its own budget.
    assert sign_in("ACME-OWNER", "wrong", address="203.0.113.6").status_code == HTTPStatus.OK
