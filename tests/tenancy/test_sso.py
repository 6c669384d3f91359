"""Single sign-on to the console against a real OpenID Connect provider the tests start on
127.0.0.1 (tests/oidc_provider: django-oauth-toolkit, its own process and database): the
authorization code flow driven end to end with the test client, the code exchanged and the
ID token verified over HTTP; a wrong audience, an expired ID token, a domain not allowed, a
role mapped from a group and changed at the provider, an invitation accepted by it."""

from __future__ import annotations

import html
from http import HTTPStatus
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.test import Client

from apps.common.errors import Forbidden
from apps.tenancy.audit_trail import OPERATOR, Actor
from apps.tenancy.models import (
    AuditKind,
    Invitation,
    Membership,
    OrgAuditEvent,
    SsoIdentity,
)
from apps.tenancy.org_context import activate_all_orgs
from apps.tenancy.services import invitation_create
from apps.tenancy.services.sso import sso_configure
from tests.oidc_provider import EXPIRED, WRONG_AUDIENCE

pytestmark = pytest.mark.django_db

CALLBACK = "http://testserver/sso/callback"
GROUPS = {
    "viewer": "countersign-viewers",
    "auditor": "countersign-auditors",
    "manager": "countersign-managers",
}
PEOPLE = {
    "erin": {"email": "erin@acme.example", "groups": ["countersign-managers", "staff"]},
    "ada": {"email": "ada@acme.example", "groups": ["countersign-auditors"]},
    "sam": {"email": "sam@acme.example", "groups": ["staff"]},
    "mallory": {"email": "mallory@evil.example", "groups": ["countersign-managers"]},
}


@pytest.fixture
def provider(oidc_provider: Any) -> Any:
    oidc_provider.set_up(
        users=[{"username": name, **person} for name, person in PEOPLE.items()],
        clients=[
            {"client_id": name, "client_secret": f"{name}-secret", "name": name,
             "redirect_uris": [CALLBACK]}
            for name in ("acme-console", EXPIRED, WRONG_AUDIENCE)
        ],
    )  # fmt: skip
    return oidc_provider


def configure(cast: Any, provider: Any, client_id: str = "acme-console", **more: Any) -> None:
    sso_configure(
        org=cast.acme, issuer=provider.issuer, client_id=client_id,
        client_secret=f"{client_id}-secret", allowed_domains=["acme.example"],
        role_groups=more.pop("role_groups", GROUPS), actor=OPERATOR, **more,
    )  # fmt: skip


def sign_in(provider: Any, username: str, org: str = "acme", client: Client | None = None) -> Any:
    """The browser's part, with the test client on the console's side and plain HTTP on
    the provider's: start, sign in at the provider, come back with the code."""
    client = client or Client()
    start = client.get("/sso/start", {"org": org})
    assert start.status_code == HTTPStatus.FOUND, start.content
    assert start["Location"].startswith(provider.issuer + "/authorize/")
    back = provider.authorize(start["Location"], username)
    assert back.startswith(CALLBACK + "?")
    answer = client.get(back.removeprefix("http://testserver"))
    answer.client = client
    answer.text = html.unescape(answer.content.decode())
    activate_all_orgs()  # the request limited this connection to the org; the test reads all
    return answer


def role_of(email: str) -> str | None:
    found = Membership.objects.filter(user__email=email).values_list("role", flat=True)
    return found.first()


def refusals() -> list[str]:
    return list(
        OrgAuditEvent.objects.filter(kind=AuditKind.SSO_REFUSED).values_list("summary", flat=True)
    )


def test_a_person_signs_in_and_lands_in_the_org_with_the_mapped_role(cast, provider):
    configure(cast, provider)
    answer = sign_in(provider, "erin")
    assert answer.status_code == HTTPStatus.FOUND
    assert answer["Location"] == f"/admin/tenancy/org/{cast.acme.pk}/dashboard/"
    assert answer.client.get(answer["Location"]).status_code == HTTPStatus.OK
    assert role_of("erin@acme.example") == "manager"
    user = get_user_model().objects.get(email="erin@acme.example")
    assert user.is_staff
    assert not user.has_usable_password()
    identity = SsoIdentity.objects.get(user=user)
    assert (identity.org, identity.issuer) == (cast.acme, provider.issuer)
    signed_in = OrgAuditEvent.objects.get(kind=AuditKind.SSO_SIGNED_IN)
    assert signed_in.detail["role"] == "manager"
    assert signed_in.actor == "erin@acme.example"


def test_a_role_mapped_from_a_group_follows_the_provider_at_the_next_sign_in(cast, provider):
    configure(cast, provider)
    sign_in(provider, "ada")
    assert role_of("ada@acme.example") == "auditor"
    provider.set_up(users=[{"username": "ada", "email": "ada@acme.example",
                            "groups": ["countersign-viewers"]}])  # fmt: skip
    assert sign_in(provider, "ada").status_code == HTTPStatus.FOUND
    assert role_of("ada@acme.example") == "viewer"
    changed = OrgAuditEvent.objects.get(kind=AuditKind.MEMBERSHIP_ROLE_CHANGED)
    assert changed.summary == "ada@acme.example is now viewer (was auditor) by single sign-on"
    provider.set_up(users=[{"username": "ada", "email": "ada@acme.example", "groups": []}])
    refused = sign_in(provider, "ada")
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert "in none of the provider's groups" in refused.text


def test_an_id_token_for_another_audience_is_refused(cast, provider):
    configure(cast, provider, client_id=WRONG_AUDIENCE)
    answer = sign_in(provider, "erin")
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert "wrong audience" in answer.text
    assert role_of("erin@acme.example") is None
    assert not get_user_model().objects.filter(email="erin@acme.example").exists()
    assert refusals() == [
        "single sign-on refused: the ID token is for another client (wrong audience)"
    ]
    assert "_auth_user_id" not in answer.client.session


def test_an_expired_id_token_is_refused(cast, provider):
    configure(cast, provider, client_id=EXPIRED)
    answer = sign_in(provider, "erin")
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert "ID token has expired" in answer.text
    assert role_of("erin@acme.example") is None
    assert "_auth_user_id" not in answer.client.session


def test_a_client_secret_no_key_decrypts_is_a_refusal_not_an_error(cast, provider, settings):
    settings.SECRETS_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    configure(cast, provider)
    settings.SECRETS_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]  # the old one lost
    answer = sign_in(provider, "erin")
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert "client secret cannot be read by the service" in answer.text
    assert "_auth_user_id" not in answer.client.session


def test_an_email_domain_not_allowed_is_refused(cast, provider):
    configure(cast, provider)
    answer = sign_in(provider, "mallory")
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert "evil.example is not an email domain allowed" in answer.text
    assert not get_user_model().objects.filter(email="mallory@evil.example").exists()
    [refusal] = OrgAuditEvent.objects.filter(kind=AuditKind.SSO_REFUSED)
    assert refusal.actor == "mallory@evil.example"


def test_an_invitation_is_accepted_by_signing_in(cast, provider):
    configure(cast, provider)
    invitation_create(org=cast.acme, email="sam@acme.example", role="auditor")
    assert sign_in(provider, "sam").status_code == HTTPStatus.FOUND  # in no mapped group
    assert role_of("sam@acme.example") == "auditor"
    assert Invitation.objects.get().accepted_at is not None
    assert OrgAuditEvent.objects.filter(kind=AuditKind.INVITATION_ACCEPTED).exists()


def test_the_org_is_found_by_the_email_domain_and_an_unknown_one_is_a_page(cast, provider):
    configure(cast, provider)
    assert sign_in(provider, "erin", org="erin@acme.example").status_code == HTTPStatus.FOUND
    unknown = Client().get("/sso/start", {"org": "nobody.example"})
    assert unknown.status_code == HTTPStatus.NOT_FOUND
    assert "No org signs in with single sign-on" in unknown.content.decode()
    assert Client().get("/sso/").status_code == HTTPStatus.OK


def test_an_account_of_another_org_is_never_taken_over(cast, provider):
    configure(cast, provider)
    accounts = get_user_model().objects
    accounts.create_user("erin-globex", email="erin@acme.example", password="pw", is_staff=True)
    Membership.objects.create(org=cast.globex, user=accounts.get(username="erin-globex"),
                              role="owner")  # fmt: skip
    # Invited to acme too: still another org's member (seen whatever the request's org).
    invitation_create(org=cast.acme, email="erin@acme.example", role="viewer")
    answer = sign_in(provider, "erin")
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert "may not take over" in answer.text
    assert not SsoIdentity.objects.exists()


def test_a_callback_not_started_here_is_refused(cast, provider):
    answer = Client().get("/sso/callback", {"code": "x", "state": "forged"})
    assert answer.status_code == HTTPStatus.BAD_REQUEST


def test_only_owners_set_single_sign_on(cast, provider):
    manager = Actor.console(get_user_model().objects.get(username="acme-manager"))
    with pytest.raises(Forbidden, match="set by its owners"):
        sso_configure(org=cast.acme, issuer=provider.issuer, client_id="x", client_secret="y",
                      allowed_domains=["acme.example"], actor=manager)  # fmt: skip


def test_the_deploy_check_warns_when_http_issuers_are_allowed(settings):
    from apps.tenancy.checks import http_issuers_allowed

    settings.SSO_ALLOW_HTTP_ISSUERS = True
    assert [message.id for message in http_issuers_allowed()] == ["mirror.W101"]
    settings.SSO_ALLOW_HTTP_ISSUERS = False
    assert http_issuers_allowed() == []


def test_a_plain_http_issuer_is_refused_unless_allowed(cast, provider, settings):
    configure(cast, provider)
    settings.SSO_ALLOW_HTTP_ISSUERS = False
    answer = Client().get("/sso/start", {"org": "acme"})
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert "is not https" in html.unescape(answer.content.decode())
