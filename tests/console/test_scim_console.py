"""Provisioning (SCIM) tokens: an owner issues one in the console (shown once) or with
issue_scim_token, managers cannot, and a revoked token is refused at once."""

from __future__ import annotations

from http import HTTPStatus
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from apps.tenancy.models import AuditKind, OrgAuditEvent, ScimToken
from apps.tenancy.org_context import activate_default
from apps.tenancy.services.scim import scim_authenticate

pytestmark = pytest.mark.django_db


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def test_an_owner_issues_a_token_shown_once_and_revokes_it(cast):
    refused = member("manager").post("/admin/tenancy/scimtoken/add/", {"org": cast.acme.pk})
    assert refused.status_code == HTTPStatus.FORBIDDEN
    owner = member("owner")
    page = owner.post("/admin/tenancy/scimtoken/add/", {"org": cast.acme.pk, "label": "okta"})
    assert page.status_code == HTTPStatus.OK
    assert "no-store" in page["Cache-Control"]
    token = ScimToken.objects.get()
    secret = page.context["secret"]
    assert secret.startswith(token.prefix + "_")
    assert "/scim/v2" in page.content.decode()
    assert secret not in owner.get("/admin/tenancy/scimtoken/").content.decode()
    assert scim_authenticate(secret) is not None
    owner.post("/admin/tenancy/scimtoken/",
               {"action": "revoke_selected", "_selected_action": [token.pk]})  # fmt: skip
    activate_default()
    assert scim_authenticate(secret) is None
    kinds = set(OrgAuditEvent.objects.values_list("kind", flat=True))
    assert {AuditKind.SCIM_TOKEN_ISSUED, AuditKind.SCIM_TOKEN_REVOKED} <= kinds


def test_issue_scim_token_prints_the_token_as_its_last_line(cast):
    out = StringIO()
    call_command("issue_scim_token", "acme", "--label", "entra", stdout=out)
    secret = out.getvalue().splitlines()[-1]
    token = scim_authenticate(secret)
    assert token is not None
    assert (token.org, token.label) == (cast.acme, "entra")
