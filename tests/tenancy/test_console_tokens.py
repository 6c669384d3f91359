"""Dashboard-plane session JWTs: issue, refresh, and the key/JWT separation."""

from http import HTTPStatus
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import Membership

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tenancy.urls")]


def user(name):
    return get_user_model().objects.get(username=name)


def bearer(token):
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_an_auditor_token_reaches_an_auditor_endpoint(cast, api_client):
    tokens = console_tokens_issue(user=user("acme-auditor"), org_slug="acme")
    response = api_client.get("/v1/dashboard-probe", **bearer(tokens.access))
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {"org": "acme", "role": "auditor"}


@pytest.mark.parametrize("role", ["auditor", "manager", "owner"])
def test_higher_roles_pass_too(cast, api_client, role):
    tokens = console_tokens_issue(user=user(f"acme-{role}"), org_slug="acme")
    assert api_client.get("/v1/dashboard-probe", **bearer(tokens.access)).status_code == 200


def test_a_role_below_the_endpoints_is_403(cast, api_client):
    tokens = console_tokens_issue(user=user("acme-viewer"), org_slug="acme")
    response = api_client.get("/v1/dashboard-probe", **bearer(tokens.access))
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert response.json() == {"detail": "this endpoint needs the auditor role or higher"}


def test_no_credential_is_401(cast, api_client):
    assert api_client.get("/v1/dashboard-probe").status_code == HTTPStatus.UNAUTHORIZED


def test_an_api_key_never_authenticates_the_dashboard(cast, api_client):
    response = api_client.get("/v1/dashboard-probe", **bearer(cast.acme_key.secret))
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    response = api_client.get("/v1/dashboard-probe", HTTP_X_API_KEY=cast.acme_key.secret)
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_session_jwt_never_authenticates_the_sdk_plane(cast, api_client):
    tokens = console_tokens_issue(user=user("acme-owner"), org_slug="acme")
    response = api_client.get("/v1/whoami", **bearer(tokens.access))
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_refresh_token_is_not_an_access_token(cast, api_client):
    tokens = console_tokens_issue(user=user("acme-owner"), org_slug="acme")
    response = api_client.get("/v1/dashboard-probe", **bearer(tokens.refresh))
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_removed_member_loses_access(cast, api_client):
    tokens = console_tokens_issue(user=user("acme-manager"), org_slug="acme")
    Membership.objects.filter(user__username="acme-manager").delete()
    response = api_client.get("/v1/dashboard-probe", **bearer(tokens.access))
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    refreshed = api_client.post(
        "/v1/console/token/refresh", {"refresh": tokens.refresh}, format="json"
    )
    assert refreshed.status_code == HTTPStatus.UNAUTHORIZED
    assert "detail" in refreshed.json()


def test_refresh_carries_the_current_role(cast, api_client):
    tokens = console_tokens_issue(user=user("acme-manager"), org_slug="acme")
    Membership.objects.filter(user__username="acme-manager").update(role="viewer")
    refreshed = api_client.post(
        "/v1/console/token/refresh", {"refresh": tokens.refresh}, format="json"
    )
    assert refreshed.status_code == HTTPStatus.OK
    assert refreshed.json()["role"] == "viewer"
    probe = api_client.get("/v1/dashboard-probe", **bearer(refreshed.json()["access"]))
    assert probe.status_code == HTTPStatus.FORBIDDEN


def test_a_forged_refresh_token_is_401(cast, api_client):
    response = api_client.post("/v1/console/token/refresh", {"refresh": "x.y.z"}, format="json")
    assert response.status_code == HTTPStatus.UNAUTHORIZED


def test_a_signed_in_console_member_obtains_a_pair(cast, client):
    client.force_login(user("acme-auditor"))
    response = client.post("/v1/console/token", {"org": "acme"}, content_type="application/json")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["role"] == "auditor"
    probe = client.get("/v1/dashboard-probe", **bearer(response.json()["access"]))
    assert probe.status_code == HTTPStatus.OK


def test_a_console_user_cannot_obtain_a_token_for_another_org(cast, client):
    client.force_login(user("acme-owner"))
    response = client.post("/v1/console/token", {"org": "globex"}, content_type="application/json")
    assert response.status_code == HTTPStatus.FORBIDDEN


def test_obtaining_needs_a_console_session(cast, api_client):
    response = api_client.post("/v1/console/token", {"org": "acme"}, format="json")
    # Session authentication sends no challenge: the contract's 403, never a 401.
    assert response.status_code == HTTPStatus.FORBIDDEN


def test_the_command_prints_the_access_token_last(cast, api_client):
    out = StringIO()
    call_command("issue_console_token", "acme-auditor", "acme", stdout=out)
    access = out.getvalue().splitlines()[-1]
    assert api_client.get("/v1/dashboard-probe", **bearer(access)).status_code == HTTPStatus.OK


def test_the_command_refuses_a_non_member(cast):
    with pytest.raises(CommandError, match="not a member"):
        call_command("issue_console_token", "acme-owner", "globex", stdout=StringIO())
