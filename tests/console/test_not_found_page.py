"""A mistyped page path answers a page leading on; an API path keeps its profile's body.

With DEBUG on too: Django's own technical page (every URL pattern of the service) never
shows.
"""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PROFILES = {
    "keyscoped": {"detail": "not found"},
    "teampath": {"error": "not_found", "message": "not found"},
}


@pytest.fixture(params=[False, True], ids=["production", "debug"])
def debug(request, settings) -> bool:
    settings.DEBUG = request.param
    return bool(request.param)


@pytest.fixture(params=list(PROFILES))
def profile(request, settings) -> dict[str, str]:
    settings.API_PROFILE = request.param
    settings.ROOT_URLCONF = f"config.urls.{request.param}"
    return PROFILES[request.param]


def assert_the_page_leads_on(answer) -> None:
    assert answer.status_code == HTTPStatus.NOT_FOUND
    assert answer["Content-Type"].startswith("text/html")
    page = answer.content.decode()
    assert "Page not found" in page
    assert 'href="/admin/"' in page
    assert 'href="/v1/docs"' in page
    assert 'href="/verify"' in page
    assert "URLconf" not in page  # not Django's technical page
    assert "v1/receipts" not in page  # which lists every route


def test_a_mistyped_page_path_answers_the_page(debug, profile) -> None:
    # A fresh client loads the middleware under this test's DEBUG.
    answer = Client().get("/verfiy")
    assert_the_page_leads_on(answer)
    assert "/verfiy" in answer.content.decode()


def test_a_mistyped_api_path_keeps_the_profile_error_body(debug, profile) -> None:
    answer = Client().get("/v1/recipts")
    assert answer.status_code == HTTPStatus.NOT_FOUND
    assert answer.json() == profile


def test_a_page_a_view_finds_nothing_for_answers_the_page(debug, profile, cast) -> None:
    client = Client()
    assert client.login(username="acme-owner", password="pw-owner")
    # The console's catch-all: a signed-in member's unknown console path raises Http404.
    assert_the_page_leads_on(client.get("/admin/no-such-screen/"))
