"""The authorization matrix of POST /v1/receipts."""

from http import HTTPStatus

import pytest

from apps.receipts.models import MirrorEntry
from apps.tenancy.services import api_key_revoke
from tests.receipts.factories import as_text

pytestmark = pytest.mark.django_db


def body(agent) -> str:
    return '{"receipt":' + as_text(agent.receipt()) + "}"


def post(api_client, payload, **headers):
    return api_client.generic(
        "POST", "/v1/receipts", payload, content_type="application/json", **headers
    )


def test_no_credential_is_401(api_client, agent, cast):
    response = post(api_client, body(agent))
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert "detail" in response.json()


def test_a_wrong_credential_type_is_401(api_client, agent, cast):
    response = post(api_client, body(agent), HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_console_session_jwt_shaped_token_is_401(api_client, agent, cast):
    jwt_like = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    response = post(api_client, body(agent), HTTP_AUTHORIZATION=f"Bearer {jwt_like}")
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_revoked_key_is_401(api_client, agent, cast):
    api_key_revoke(prefix=cast.acme_key.api_key.prefix)
    response = post(api_client, body(agent), HTTP_X_API_KEY=cast.acme_key.secret)
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_key_without_receipts_write_is_403(api_client, agent, cast):
    response = post(api_client, body(agent), HTTP_X_API_KEY=cast.acme_policy_only_key.secret)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert not MirrorEntry.objects.exists()


def test_bearer_and_x_api_key_are_equivalent(api_client, agent, cast):
    response = post(api_client, body(agent), HTTP_AUTHORIZATION=f"Bearer {cast.acme_key.secret}")
    assert response.status_code == HTTPStatus.CREATED


def test_an_unrouted_path_answers_in_the_error_body(api_client, cast):
    response = api_client.get("/v1/nothing-here")
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert response.json() == {"detail": "not found"}
