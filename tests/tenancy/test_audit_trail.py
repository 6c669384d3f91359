"""The org's audit trail is written by the services, in the transaction of each change,
with whoever acts: a console user, an API key or dashboard user, or a command's --actor."""

from __future__ import annotations

from datetime import date
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import transaction

from apps.approvals.services import approver_key_register, approver_key_revoke
from apps.audit.evidence import EvidenceWindow, evidence_export
from apps.policy.services import policy_deploy
from apps.tenancy.audit_trail import Actor
from apps.tenancy.console_tokens import console_tokens_issue
from apps.tenancy.models import ApiKey, AuditKind, OrgAuditEvent, Plan, Role
from apps.tenancy.services import (
    api_key_issue,
    api_key_revoke,
    api_key_rotate,
    membership_add,
    membership_remove,
    org_create,
    org_set_limits,
)
from tests.approvals.conftest import Approver

pytestmark = pytest.mark.django_db

ALICE = Actor.command("alice")
POLICY = (
    '[[rule]]\nid = "search.allow"\norder = 10\nenabled = true\nsubject = { kind = "any" }\n'
    'verb = "tool_call"\nscope = "*"\ndecision = "allow"\n'
)


def latest(kind: str) -> OrgAuditEvent:
    return OrgAuditEvent.objects.filter(kind=kind).latest("id")


def act_export(cast: Any) -> None:
    with evidence_export(org=cast.acme, window=EvidenceWindow(None, date.today()), actor=ALICE):
        pass


ACTS = {
    AuditKind.ORG_CREATED: lambda cast: org_create(slug="initech", actor=ALICE),
    AuditKind.ORG_LIMITS_SET: lambda cast: org_set_limits(
        org=cast.acme, monthly_receipt_cap=5, plan=Plan.TEAM, actor=ALICE
    ),
    AuditKind.API_KEY_ISSUED: lambda cast: api_key_issue(
        org=cast.acme, scopes=["receipts:write"], actor=ALICE
    ),
    AuditKind.API_KEY_REVOKED: lambda cast: api_key_revoke(
        prefix=cast.acme_key.api_key.prefix, actor=ALICE
    ),
    AuditKind.API_KEY_ROTATED: lambda cast: api_key_rotate(
        prefix=cast.acme_key.api_key.prefix, actor=ALICE
    ),
    AuditKind.MEMBERSHIP_ADDED: lambda cast: membership_add(
        org=cast.acme, username="dana", role=Role.VIEWER, actor=ALICE
    ),
    AuditKind.MEMBERSHIP_ROLE_CHANGED: lambda cast: membership_add(
        org=cast.acme, username="acme-viewer", role=Role.AUDITOR, actor=ALICE
    ),
    AuditKind.MEMBERSHIP_REMOVED: lambda cast: membership_remove(
        org=cast.acme, username="acme-viewer", actor=ALICE
    ),
    AuditKind.POLICY_DEPLOYED: lambda cast: policy_deploy(org=cast.acme, toml=POLICY, actor=ALICE),
    AuditKind.APPROVER_KEY_REGISTERED: lambda cast: approver_key_register(
        org=cast.acme, public_key=Approver("bob").public, key_id="bob", actor=ALICE
    ),
    AuditKind.EVIDENCE_EXPORTED: act_export,
}


@pytest.mark.parametrize("kind", list(ACTS), ids=str)
def test_each_operator_act_is_recorded_with_its_actor(cast, kind) -> None:
    ACTS[kind](cast)
    event = latest(kind)
    assert (event.via, event.actor, event.user, event.api_key) == ("command", "alice", None, None)
    assert event.summary
    assert event.org.slug == ("initech" if kind == AuditKind.ORG_CREATED else "acme")


def test_approver_key_rotation_and_revocation_are_recorded(cast) -> None:
    first, second = Approver("bob"), Approver("bob-new-laptop")
    approver_key_register(org=cast.acme, public_key=first.public, key_id="bob", actor=ALICE)
    approver_key_register(org=cast.acme, public_key=second.public, key_id="bob", actor=ALICE)
    rotated = latest(AuditKind.APPROVER_KEY_ROTATED)
    assert rotated.detail["previous_public_key"] == first.public
    approver_key_revoke(org=cast.acme, key_id="bob", actor=ALICE)
    assert latest(AuditKind.APPROVER_KEY_REVOKED).detail["public_key"] == second.public


def test_nothing_is_recorded_when_nothing_changes(cast) -> None:
    before = OrgAuditEvent.objects.count()
    api_key_revoke(prefix=cast.acme_key.api_key.prefix, actor=ALICE)
    api_key_revoke(prefix=cast.acme_key.api_key.prefix, actor=ALICE)  # revoked already
    org_set_limits(org=cast.acme, plan=cast.acme.plan, actor=ALICE)  # the same plan
    policy_deploy(org=cast.acme, toml=POLICY, actor=ALICE)
    policy_deploy(org=cast.acme, toml=POLICY, actor=ALICE)  # the active text again
    assert OrgAuditEvent.objects.count() == before + 2


def test_a_change_rolled_back_leaves_no_audit_event(cast) -> None:
    before = OrgAuditEvent.objects.count()

    def issue_then_fail() -> None:
        with transaction.atomic():
            api_key_issue(org=cast.acme, scopes=["receipts:write"], label="gone", actor=ALICE)
            raise RuntimeError("the caller's transaction fails after the issue")

    with pytest.raises(RuntimeError):
        issue_then_fail()
    assert not ApiKey.objects.filter(label="gone").exists()
    assert OrgAuditEvent.objects.count() == before


def test_a_refused_act_records_nothing(cast) -> None:
    before = OrgAuditEvent.objects.count()
    with pytest.raises(Exception, match="last owner"):
        membership_remove(org=cast.acme, username="acme-owner", actor=ALICE)
    assert OrgAuditEvent.objects.count() == before


def test_a_console_user_is_recorded_as_such(cast) -> None:
    manager = get_user_model().objects.get(username="acme-manager")
    membership_add(org=cast.acme, username="dana", role=Role.VIEWER, actor=Actor.console(manager))
    event = latest(AuditKind.MEMBERSHIP_ADDED)
    assert (event.via, event.actor, event.user) == ("console", "acme-manager", manager)


def test_the_dashboard_api_records_the_member_and_the_sdk_api_the_key(
    cast, dashboard, api_client
) -> None:
    dashboard("manager").post("/v1/policy", {"toml": POLICY}, format="json")
    deployed = latest(AuditKind.POLICY_DEPLOYED)
    assert (deployed.via, deployed.actor, deployed.user.username) == (
        "api",
        "acme-manager",
        "acme-manager",
    )
    issued = api_key_issue(org=cast.acme, scopes=["approvers:write"])
    api_client.credentials(HTTP_X_API_KEY=issued.secret)
    answer = api_client.post(
        "/v1/orgs/register-approver-pubkey", {"public_key": Approver("erin").public}, format="json"
    )
    assert answer.status_code == 200, answer.content
    registered = latest(AuditKind.APPROVER_KEY_REGISTERED)
    assert (registered.via, registered.api_key) == ("api", issued.api_key)
    assert registered.actor == issued.api_key.prefix


def test_a_dashboard_session_token_is_recorded(cast) -> None:
    viewer = get_user_model().objects.get(username="acme-viewer")
    console_tokens_issue(user=viewer, org_slug="acme", via="console")
    event = latest(AuditKind.CONSOLE_TOKEN_ISSUED)
    assert (event.via, event.actor, event.detail["role"]) == ("console", "acme-viewer", "viewer")


def test_commands_record_the_actor_they_are_given(cast) -> None:
    out = StringIO()
    call_command(
        "issue_api_key", "acme", "--scopes", "receipts:write", "--actor", "ops-bob", stdout=out
    )
    event = latest(AuditKind.API_KEY_ISSUED)
    assert (event.via, event.actor) == ("command", "ops-bob")
    call_command("set_org_limits", "acme", "--monthly-cap", "7", stdout=out)
    assert latest(AuditKind.ORG_LIMITS_SET).actor  # the OS user by default
