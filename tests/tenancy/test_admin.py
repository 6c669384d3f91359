from http import HTTPStatus

import pytest
from django.contrib.auth import get_user_model

from apps.tenancy.models import ApiKey, Invitation
from apps.tenancy.services import api_key_authenticate

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def test_issuing_a_key_in_the_console_shows_the_secret_once(cast, operator_client):
    response = operator_client.post(
        "/admin/tenancy/apikey/add/",
        {"org": cast.globex.pk, "label": "from-console", "scopes": ["receipts:write"]},
    )
    # Shown in this response only (never in a message: a cookie or the session keeps those).
    assert response.status_code == HTTPStatus.OK
    assert "no-store" in response["Cache-Control"]
    key = ApiKey.objects.get(label="from-console")
    assert "not shown again" in response.content.decode()
    secret = response.context["issued"][0]["secret"]
    assert secret.startswith(key.prefix)
    assert not list(response.context["messages"])
    assert api_key_authenticate(presented=secret) == key
    assert key.scopes == ["receipts:write"]
    page = operator_client.get(f"/admin/tenancy/apikey/{key.pk}/change/")
    assert secret not in page.content.decode()


def test_the_revoke_action_revokes_selected_keys(cast, operator_client):
    key = cast.acme_key.api_key
    operator_client.post(
        "/admin/tenancy/apikey/",
        {"action": "revoke_selected", "_selected_action": [key.pk]},
        follow=True,
    )
    key.refresh_from_db()
    assert key.is_revoked


def test_adding_a_member_in_the_console_invites_them(cast, operator_client):
    operator_client.post(
        "/admin/tenancy/membership/add/",
        {"org": cast.globex.pk, "email": "newbie@globex.example", "role": "viewer"},
        follow=True,
    )
    invitation = Invitation.objects.get(email="newbie@globex.example")
    assert (invitation.org, invitation.role) == (cast.globex, "viewer")
    assert not get_user_model().objects.filter(email="newbie@globex.example").exists()


def test_the_console_lists_orgs_keys_and_members(cast, operator_client):
    for page in ("org", "apikey", "membership"):
        assert operator_client.get(f"/admin/tenancy/{page}/").status_code == HTTPStatus.OK
