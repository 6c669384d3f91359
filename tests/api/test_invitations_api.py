"""The dashboard plane's invitation routes: the authorization matrix, never a role above the
caller's, send again, revoke, and another org's invitation is not found."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from apps.tenancy.models import AuditKind, Invitation, OrgAuditEvent
from apps.tenancy.services import invitation_create
from tests.tenancy.invitation_helpers import link_sent_to

pytestmark = pytest.mark.django_db

DANA = {"email": "dana@acme.example", "role": "auditor"}


def test_no_credential_is_401_and_an_api_key_is_401(cast) -> None:
    assert APIClient().get("/v1/invitations").status_code == HTTPStatus.UNAUTHORIZED
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    assert client.post("/v1/invitations", DANA, format="json").status_code == 401


@pytest.mark.parametrize(
    ("role", "status"), [("viewer", 403), ("auditor", 403), ("manager", 201), ("owner", 201)]
)
def test_managers_and_owners_invite(cast, dashboard, role, status) -> None:
    assert dashboard(role).post("/v1/invitations", DANA, format="json").status_code == status


def test_an_invitation_is_created_listed_and_never_shows_its_link(cast, dashboard) -> None:
    client = dashboard("manager")
    created = client.post("/v1/invitations", DANA, format="json")
    assert created.status_code == HTTPStatus.CREATED
    body = created.json()
    assert (body["email"], body["role"], body["status"], body["inviter"]) == (
        "dana@acme.example", "auditor", "pending", "acme-manager",
    )  # fmt: skip
    assert body["id"].startswith("inv_")
    link = link_sent_to("dana@acme.example")
    assert link.rsplit("/", 1)[1] not in created.content.decode()
    assert [item["id"] for item in client.get("/v1/invitations").json()] == [body["id"]]
    assert client.get(f"/v1/invitations/{body['id']}").json()["sent_count"] == 1
    sent = OrgAuditEvent.objects.get(kind=AuditKind.INVITATION_SENT)
    assert (sent.via, sent.actor) == ("api", "acme-manager")


def test_never_a_role_above_the_callers_and_bad_input_is_422(cast, dashboard) -> None:
    client = dashboard("manager")
    above = client.post("/v1/invitations", {**DANA, "role": "owner"}, format="json")
    assert above.status_code == HTTPStatus.FORBIDDEN
    assert "cannot invite to the owner role" in above.json()["detail"]
    for bad in ({"email": "not an address", "role": "viewer"}, {**DANA, "role": "emperor"}, {}):
        answer = client.post("/v1/invitations", bad, format="json")
        assert answer.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, bad
        assert "detail" in answer.json()
    client.post("/v1/invitations", DANA, format="json")
    twice = client.post("/v1/invitations", DANA, format="json")
    assert twice.status_code == HTTPStatus.CONFLICT


def test_send_again_then_revoke_then_both_refused(cast, dashboard) -> None:
    client = dashboard("owner")
    invitation_id = client.post("/v1/invitations", DANA, format="json").json()["id"]
    first = link_sent_to("dana@acme.example")
    resent = client.post(f"/v1/invitations/{invitation_id}/resend")
    assert resent.status_code == HTTPStatus.OK
    assert resent.json()["sent_count"] == 2
    assert link_sent_to("dana@acme.example") != first
    revoked = client.post(f"/v1/invitations/{invitation_id}/revoke", {}, format="json")
    assert revoked.json()["status"] == "revoked"
    for act in ("resend", "revoke"):
        again = client.post(f"/v1/invitations/{invitation_id}/{act}")
        assert again.status_code == HTTPStatus.GONE
        assert "was revoked" in again.json()["detail"]
    members = client.post(f"/v1/invitations/{invitation_id}/resend", {"x": 1}, format="json")
    assert members.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_another_orgs_invitation_is_404(cast, dashboard) -> None:
    theirs = invitation_create(org=cast.globex, email="g@globex.example", role="viewer")
    client = dashboard("owner")
    for path in (f"/v1/invitations/inv_{theirs.pk}", "/v1/invitations/inv_0", "/v1/invitations/x"):
        assert client.get(path).status_code == HTTPStatus.NOT_FOUND, path
    answer = client.post(f"/v1/invitations/inv_{theirs.pk}/revoke")
    assert answer.status_code == HTTPStatus.NOT_FOUND
    assert Invitation.objects.get(pk=theirs.pk).revoked_at is None
