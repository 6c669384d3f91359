from http import HTTPStatus

import pytest

from apps.tenancy.services import api_key_revoke

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tenancy.urls")]


def test_it_accepts_the_key_in_x_api_key(cast, api_client):
    response = api_client.get("/v1/whoami", HTTP_X_API_KEY=cast.acme_key.secret)
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {"org": "acme", "prefix": cast.acme_key.api_key.prefix}


def test_it_accepts_the_same_key_as_a_bearer_token(cast, api_client):
    response = api_client.get("/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {cast.acme_key.secret}")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["org"] == "acme"


def test_it_resolves_the_org_from_the_key(cast, api_client):
    response = api_client.get("/v1/whoami", HTTP_X_API_KEY=cast.globex_key.secret)
    assert response.json()["org"] == "globex"


def test_it_answers_401_with_a_detail_without_a_credential(cast, api_client):
    response = api_client.get("/v1/whoami")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert "detail" in response.json()
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "presented",
    ["nonsense", "hk_000000000000_wrong", "", "Bearer"],
)
def test_it_answers_401_to_a_key_that_matches_nothing(cast, api_client, presented):
    response = api_client.get("/v1/whoami", HTTP_AUTHORIZATION=f"Bearer {presented}")
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_it_answers_401_to_a_right_prefix_with_a_wrong_secret(cast, api_client):
    forged = cast.acme_key.secret[:-4] + "AAAA"
    response = api_client.get("/v1/whoami", HTTP_X_API_KEY=forged)
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_it_answers_401_to_a_revoked_key(cast, api_client):
    api_key_revoke(prefix=cast.acme_key.api_key.prefix)
    response = api_client.get("/v1/whoami", HTTP_X_API_KEY=cast.acme_key.secret)
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_it_answers_401_to_a_non_bearer_authorization_scheme(cast, api_client):
    response = api_client.get("/v1/whoami", HTTP_AUTHORIZATION=f"Basic {cast.acme_key.secret}")
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_it_answers_403_to_a_valid_key_without_the_scope(cast, api_client):
    response = api_client.get("/v1/whoami", HTTP_X_API_KEY=cast.acme_policy_only_key.secret)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json() == {"detail": "API key lacks scope receipts:write"}


def test_it_records_when_a_key_was_last_used(cast, api_client):
    assert cast.acme_key.api_key.last_used_at is None
    api_client.get("/v1/whoami", HTTP_X_API_KEY=cast.acme_key.secret)
    cast.acme_key.api_key.refresh_from_db()
    assert cast.acme_key.api_key.last_used_at is not None
