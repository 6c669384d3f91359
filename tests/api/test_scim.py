"""SCIM 2.0 provisioning with a SCIM client (requests, over the live server) and an org's
bearer token: people and groups become memberships with the role their groups give, and
deprovisioning (deactivation, deletion, the last group left) removes the membership, ends
the sessions and revokes the approver keys in one transaction, in the org's audit trail."""

from __future__ import annotations

from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client

from apps.approvals.models import ApproverKey
from apps.approvals.services import approver_key_register
from apps.tenancy.audit_trail import OPERATOR, Actor
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import AuditKind, Membership, OrgAuditEvent, ScimUser
from apps.tenancy.org_context import activate_default
from apps.tenancy.services.scim import scim_token_issue
from tests.approvals.conftest import Approver

pytestmark = pytest.mark.django_db(transaction=True)

SCIM = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


class ScimClient:
    """What an identity provider sends: SCIM JSON with the org's bearer token."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base + "/scim/v2"
        self.session = requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {token}", "Content-Type": SCIM,
                                     "Accept": SCIM})  # fmt: skip

    def __call__(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        answer = self.session.request(method, self.base + path, json=body, params=params,
                                      timeout=30)  # fmt: skip
        answer.body = answer.json() if answer.content else None
        return answer

    def create_user(self, user_name: str, **more: Any) -> str:
        body = {"schemas": [USER], "userName": user_name, "active": True,
                "name": {"givenName": "Dana", "familyName": "Scully"},
                "emails": [{"value": user_name, "primary": True}], **more}  # fmt: skip
        answer = self("POST", "/Users", body)
        assert answer.status_code == HTTPStatus.CREATED, answer.text
        return str(answer.body["id"])

    def create_group(self, name: str, *members: str) -> str:
        body = {"schemas": [GROUP], "displayName": name,
                "members": [{"value": member} for member in members]}  # fmt: skip
        answer = self("POST", "/Groups", body)
        assert answer.status_code == HTTPStatus.CREATED, answer.text
        return str(answer.body["id"])

    def patch(self, path: str, *operations: dict[str, Any]) -> Any:
        return self("PATCH", path, {"schemas": [PATCH], "Operations": list(operations)})


@pytest.fixture
def scim(cast, live_server) -> Iterator[ScimClient]:
    issued = scim_token_issue(org=cast.acme, label="okta", actor=OPERATOR)
    client = ScimClient(live_server.url, issued.secret)
    yield client
    client.session.close()  # no kept-alive connection holds the live server's thread


def role_of(user_name: str) -> str | None:
    activate_default()
    return (
        Membership.objects.filter(user__username=user_name).values_list("role", flat=True).first()
    )


def test_a_person_in_a_group_becomes_a_member_with_its_role(cast, scim):
    dana = scim.create_user("dana@acme.example")
    assert role_of("dana@acme.example") is None  # provisioned, no group yet
    listed = scim("GET", "/Users", filter='userName eq "dana@acme.example"')
    assert [item["id"] for item in listed.body["Resources"]] == [dana]
    assert listed.headers["Content-Type"].startswith(SCIM)
    managers = scim.create_group("manager", dana)
    assert role_of("dana@acme.example") == "manager"
    scim.patch(f"/Groups/{managers}", {"op": "replace", "path": "displayName", "value": "viewer"})
    assert role_of("dana@acme.example") == "viewer"
    auditors = scim.create_group("auditor")
    scim.patch(f"/Groups/{auditors}", {"op": "add", "path": "members", "value": [{"value": dana}]})
    assert role_of("dana@acme.example") == "auditor"  # the highest of viewer and auditor
    shown = scim("GET", f"/Users/{dana}").body
    assert sorted(group["display"] for group in shown["groups"]) == ["auditor", "viewer"]
    account = get_user_model().objects.get(username="dana@acme.example")
    assert account.is_staff
    assert not account.has_usable_password()
    assert OrgAuditEvent.objects.filter(kind=AuditKind.MEMBER_PROVISIONED).count() == 1


def test_deactivating_a_person_ends_membership_sessions_and_approver_keys(cast, scim):
    dana = scim.create_user("dana@acme.example")
    scim.create_group("manager", dana)
    account = get_user_model().objects.get(username="dana@acme.example")
    key = approver_key_register(org=cast.acme, public_key=Approver("dana").public,
                                key_id="dana-laptop", actor=Actor.console(account)).key  # fmt: skip
    # A device bound to Dana by an administrator (not registered by Dana herself).
    phone = approver_key_register(org=cast.acme, public_key=Approver("dana-phone").public,
                                  key_id="dana-phone", actor=Actor.command("ops")).key  # fmt: skip
    ApproverKey.objects.filter(pk=phone.pk).update(member=account)
    console = Client()
    console.force_login(account)
    assert console.get("/admin/").status_code == HTTPStatus.FOUND  # to the org's dashboard
    tokens = console_tokens_issue(user=account, org_slug="acme")
    activate_default()

    answer = scim.patch(f"/Users/{dana}", {"op": "replace", "value": {"active": False}})
    assert answer.status_code == HTTPStatus.OK, answer.text
    assert answer.body["active"] is False

    activate_default()
    assert role_of("dana@acme.example") is None
    assert ApproverKey.objects.get(pk=key.pk).revoked_at is not None
    assert ApproverKey.objects.get(pk=phone.pk).revoked_at is not None
    account.refresh_from_db()
    assert not account.is_active
    assert console.get("/admin/")["Location"].startswith("/admin/login/")
    refused = Client().get("/v1/audit/chain", HTTP_AUTHORIZATION=f"Bearer {tokens.access}")
    assert refused.status_code == HTTPStatus.UNAUTHORIZED
    done = OrgAuditEvent.objects.get(kind=AuditKind.MEMBER_DEPROVISIONED)
    assert done.detail == {
        "username": "dana@acme.example", "reason": "deactivated by the identity provider",
        "approver_keys": ["dana-laptop", "dana-phone"], "membership_removed": True,
        "account_deactivated": True,
    }  # fmt: skip
    assert (done.via, done.actor) == ("scim", f"SCIM token {scim_token_prefix(scim)}")
    assert OrgAuditEvent.objects.filter(kind=AuditKind.APPROVER_KEY_REVOKED, via="scim").exists()


def scim_token_prefix(scim: ScimClient) -> str:
    return scim.session.headers["Authorization"].split()[1][: len("scim_") + 12]


def test_deleting_a_person_deprovisions_them_and_they_are_gone(cast, scim):
    dana = scim.create_user("dana@acme.example")
    scim.create_group("auditor", dana)
    assert scim("DELETE", f"/Users/{dana}").status_code == HTTPStatus.NO_CONTENT
    assert role_of("dana@acme.example") is None
    assert scim("GET", f"/Users/{dana}").status_code == HTTPStatus.NOT_FOUND
    assert not ScimUser.objects.exists()
    assert OrgAuditEvent.objects.get(kind=AuditKind.MEMBER_DEPROVISIONED).detail["reason"] == (
        "deleted by the identity provider"
    )


def test_leaving_the_last_group_deprovisions_and_joining_again_restores(cast, scim):
    dana = scim.create_user("dana@acme.example")
    group = scim.create_group("viewer", dana)
    scim.patch(f"/Groups/{group}", {"op": "remove", "path": f'members[value eq "{dana}"]'})
    assert role_of("dana@acme.example") is None
    assert not get_user_model().objects.get(username="dana@acme.example").is_active
    scim.patch(f"/Groups/{group}", {"op": "add", "path": "members", "value": [{"value": dana}]})
    assert role_of("dana@acme.example") == "viewer"
    assert get_user_model().objects.get(username="dana@acme.example").is_active


def test_a_refused_deprovisioning_changes_nothing(cast, scim):
    """The last owner stays: the whole deprovisioning is refused, keys included."""
    dana = scim.create_user("dana@acme.example")
    scim.create_group("owner", dana)
    Membership.objects.filter(user__username="acme-owner").update(role="manager")
    account = get_user_model().objects.get(username="dana@acme.example")
    key = approver_key_register(org=cast.acme, public_key=Approver("dana").public,
                                key_id="dana-laptop", actor=Actor.console(account)).key  # fmt: skip
    answer = scim.patch(f"/Users/{dana}", {"op": "replace", "path": "active", "value": False})
    assert answer.status_code == HTTPStatus.CONFLICT
    assert "last owner" in answer.body["detail"]
    activate_default()
    assert role_of("dana@acme.example") == "owner"
    assert ApproverKey.objects.get(pk=key.pk).revoked_at is None
    assert ScimUser.objects.get().active is True
    assert not OrgAuditEvent.objects.filter(kind=AuditKind.MEMBER_DEPROVISIONED).exists()


def test_tokens_are_per_org_and_bad_requests_are_scim_errors(cast, scim, live_server):
    dana = scim.create_user("dana@acme.example")
    globex = ScimClient(live_server.url, scim_token_issue(org=cast.globex, actor=OPERATOR).secret)
    assert globex("GET", f"/Users/{dana}").status_code == HTTPStatus.NOT_FOUND
    assert globex("GET", "/Users").body["totalResults"] == 0
    assert (
        globex("GET", "/Users", filter='userName eq "dana@acme.example"').body["totalResults"] == 0
    )
    for token in ("", "scim_nothing", "scim_" + "0" * 12 + "_forged"):
        assert ScimClient(live_server.url, token)("GET", "/Users").status_code == 401
    assert scim("GET", "/Users/not-a-uuid").status_code == HTTPStatus.NOT_FOUND
    again = scim("POST", "/Users", {"schemas": [USER], "userName": "dana@acme.example"})
    assert again.status_code == HTTPStatus.CONFLICT
    assert again.body["scimType"] == "uniqueness"
    nameless = scim("POST", "/Users", {"schemas": [USER], "userName": ""})
    assert nameless.status_code == HTTPStatus.BAD_REQUEST
    unknown_member = scim("POST", "/Groups", {"schemas": [GROUP], "displayName": "manager",
                                              "members": [{"value": "0" * 32}]})  # fmt: skip
    assert unknown_member.status_code == HTTPStatus.NOT_FOUND


def test_another_orgs_member_is_never_taken_over(cast, scim):
    get_user_model().objects.create_user("gina@globex.example", email="gina@globex.example")
    Membership.objects.create(org=cast.globex, user=get_user_model().objects.get(
        username="gina@globex.example"), role="owner")  # fmt: skip
    answer = scim("POST", "/Users", {"schemas": [USER], "userName": "gina@globex.example"})
    assert answer.status_code == HTTPStatus.CONFLICT
    assert "may not take over" in answer.body["detail"]


def test_an_account_that_joined_another_org_stays_active_when_deprovisioned_here(cast, scim):
    dana = scim.create_user("dana@acme.example")
    scim.create_group("viewer", dana)
    account = get_user_model().objects.get(username="dana@acme.example")
    Membership.objects.create(org=cast.globex, user=account, role="viewer")  # invited there
    scim.patch(f"/Users/{dana}", {"op": "replace", "path": "active", "value": False})
    activate_default()
    assert list(Membership.objects.filter(user=account).values_list("org__slug", flat=True)) == [
        "globex"
    ]
    account.refresh_from_db()
    assert account.is_active
