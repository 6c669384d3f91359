"""Single sign-on in the console: owners set it on its page (managers cannot), and a person
signs in with it in Chromium, from the sign-in page through the provider the tests start
(tests/oidc_provider) to the org's dashboard."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.test import Client

from apps.tenancy.audit_trail import OPERATOR
from apps.tenancy.models import AuditKind, Membership, OrgAuditEvent, SsoConfig
from apps.tenancy.services.sso import sso_configure


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def form(cast: Any, **more: Any) -> dict[str, Any]:
    return {
        "org": cast.acme.pk, "enabled": "on", "issuer": "https://id.acme.example/",
        "client_id": "console", "new_client_secret": "s3cret", "scopes": "openid email profile",
        "domains": "acme.example, Acme.ORG", "groups_claim": "groups",
        "group_viewer": "", "group_auditor": "auditors", "group_manager": "leads",
        "group_owner": "", "default_role": "viewer", **more,
    }  # fmt: skip


@pytest.mark.django_db
def test_an_owner_sets_single_sign_on_and_a_manager_cannot(cast):
    refused = member("manager").post("/admin/tenancy/ssoconfig/add/", form(cast))
    assert refused.status_code == HTTPStatus.FORBIDDEN
    saved = member("owner").post("/admin/tenancy/ssoconfig/add/", form(cast))
    assert saved.status_code == HTTPStatus.FOUND, saved.content.decode()[:2000]
    config = SsoConfig.objects.get()
    assert config.issuer == "https://id.acme.example"
    assert config.allowed_domains == ["acme.example", "acme.org"]
    assert config.role_groups == {"auditor": "auditors", "manager": "leads"}
    assert config.client_secret == "s3cret"
    audited = OrgAuditEvent.objects.get(kind=AuditKind.SSO_CONFIGURED)
    assert "s3cret" not in str(audited.detail)
    # Changed without a secret: the stored one stays.
    page = f"/admin/tenancy/ssoconfig/{config.pk}/change/"
    shown = member("owner").get(page).content.decode()
    assert "s3cret" not in shown
    member("owner").post(page, form(cast, new_client_secret="", group_owner="admins"))
    config.refresh_from_db()
    assert config.client_secret == "s3cret"
    assert config.role_groups["owner"] == "admins"
    viewer_page = member("viewer").get(page)
    assert viewer_page.status_code == HTTPStatus.OK
    assert "s3cret" not in viewer_page.content.decode()


@pytest.mark.django_db
def test_the_sign_in_page_leads_to_single_sign_on(cast):
    page = Client().get("/admin/login/").content.decode()
    assert 'href="/sso/"' in page


@pytest.mark.django_db(transaction=True)
def test_a_person_signs_in_with_single_sign_on_in_the_browser(
    cast, page, live_server, oidc_provider
):
    oidc_provider.set_up(
        users=[{"username": "erin", "email": "erin@acme.example",
                "groups": ["countersign-managers"]}],
        clients=[{"client_id": "acme-browser", "client_secret": "browser-secret",
                  "name": "acme-browser", "redirect_uris": [f"{live_server.url}/sso/callback"]}],
    )  # fmt: skip
    sso_configure(
        org=cast.acme, issuer=oidc_provider.issuer, client_id="acme-browser",
        client_secret="browser-secret", allowed_domains=["acme.example"],
        role_groups={"manager": "countersign-managers"}, actor=OPERATOR,
    )  # fmt: skip
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/admin/login/")
    page.click("text=Sign in with single sign-on")
    page.fill("#sso-org", "erin@acme.example")
    page.click("button[type=submit]")
    page.wait_for_url(f"{oidc_provider.issuer.removesuffix('/o')}/accounts/login/**")
    page.fill("#provider-username", "erin")
    page.fill("#provider-password", "provider-pw-1")
    page.click("button[type=submit]")
    page.wait_for_url("**/admin/tenancy/org/*/dashboard/")
    assert Membership.objects.get(user__email="erin@acme.example").role == "manager"
