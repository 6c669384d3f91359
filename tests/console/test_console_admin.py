"""The console (Django admin): pages and actions, for a superuser and for members by role."""

from __future__ import annotations

import re
from http import HTTPStatus

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.test import Client

from apps.approvals.models import ApproverKey
from apps.approvals.services import approval_open, approver_key_register
from apps.policy.selectors import policy_active
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import ApiKey, OrgAuditEvent
from apps.tenancy.services import api_key_authenticate
from tests.approvals.conftest import Approver
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH, FLOOR_BYPASS
from tests.receipts.factories import Agent


@pytest.fixture
def superuser_client(db) -> Client:
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.login(username="root", password="pw-root")
    return client


def member(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


@pytest.fixture
def mirrored(cast, push) -> list[dict]:
    agent = Agent()
    receipts = [agent.receipt() for _ in range(3)]
    for receipt in receipts:
        assert push(receipt).status_code == HTTPStatus.CREATED
    return receipts


# --- org dashboard ------------------------------------------------------------------------------


def test_the_org_dashboard_shows_counters_sparklines_queue_policy_and_quota(
    cast, superuser_client, mirrored
) -> None:
    approver = Approver("alice")
    approver_key_register(org=cast.acme, public_key=approver.public, key_id="alice")
    approval_open(org=cast.acme, action_hash="ab" * 32, rule_id="payments.review")
    page = superuser_client.get(f"/admin/tenancy/org/{cast.acme.pk}/dashboard/")
    assert page.status_code == HTTPStatus.OK
    html = page.content.decode()
    assert html.count("<svg") >= 10
    assert "Receipts mirrored" in html
    assert "3 / 250,000 (0.0% of quota) receipts" in html
    assert "payments.review" in html
    assert "fail-safe" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # no external assets


def test_a_member_sees_only_their_orgs_dashboard(cast) -> None:
    client = member("viewer")
    assert client.get(f"/admin/tenancy/org/{cast.acme.pk}/dashboard/").status_code == 200
    assert client.get(f"/admin/tenancy/org/{cast.globex.pk}/dashboard/").status_code == 404
    listing = client.get("/admin/tenancy/org/").content.decode()
    assert ">acme<" in listing
    assert ">globex<" not in listing


# --- receipts -----------------------------------------------------------------------------------


def test_receipts_are_searchable_readable_and_reverifiable(cast, superuser_client, mirrored):
    action_hash = mirrored[1]["content"]["action_hash"]
    listing = superuser_client.get("/admin/receipts/mirrorentry/", {"q": action_hash})
    assert listing.status_code == HTTPStatus.OK
    assert listing.content.decode().count(action_hash[:20]) >= 1
    entry = MirrorEntry.objects.get(action_hash=action_hash)
    detail = superuser_client.get(f"/admin/receipts/mirrorentry/{entry.pk}/change/").content
    text = detail.decode()
    assert "tool_call search api.example.com" in text
    valid = "Valid at L0 (the receipt verifies: its hash, signatures and trust level hold)"
    assert f"#2: {valid}; digest and chain link hold" in text
    answer = superuser_client.post(
        "/admin/receipts/mirrorentry/",
        {"action": "reverify_selected", "_selected_action": [entry.pk]},
        follow=True,
    )
    assert "#2: Valid at L0" in answer.content.decode()


def test_a_tampered_stored_receipt_shows_up_on_reverification(cast, superuser_client, mirrored):
    entry = MirrorEntry.objects.get(seq=2, org=cast.acme)
    MirrorEntry.objects.filter(pk=entry.pk).update(receipt=entry.receipt.replace("weather", "w"))
    text = superuser_client.get(f"/admin/receipts/mirrorentry/{entry.pk}/change/").content.decode()
    assert "#2: Valid" not in text
    assert "does not match" in text


def test_receipts_cannot_be_added_changed_or_deleted(cast, superuser_client, mirrored) -> None:
    entry = MirrorEntry.objects.first()
    assert superuser_client.get("/admin/receipts/mirrorentry/add/").status_code == 403
    assert (
        superuser_client.get(f"/admin/receipts/mirrorentry/{entry.pk}/delete/").status_code == 403
    )


# --- policy -------------------------------------------------------------------------------------


def test_a_manager_deploys_from_the_console_through_the_service(cast) -> None:
    client = member("manager")
    answer = client.post(
        "/admin/policy/policyversion/add/", {"org": cast.acme.pk, "toml": ALLOW_SEARCH}
    )
    assert answer.status_code == HTTPStatus.FOUND
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH
    assert LogEntry.objects.filter(object_repr__startswith="pol_").exists()


def test_a_floor_bypass_is_shown_inline_with_the_rule_id(cast) -> None:
    answer = member("manager").post(
        "/admin/policy/policyversion/add/", {"org": cast.acme.pk, "toml": FLOOR_BYPASS}
    )
    assert answer.status_code == HTTPStatus.OK
    assert "(rule pay.allow)" in answer.content.decode()
    assert policy_active(org=cast.acme).is_fail_safe


def test_viewers_cannot_deploy(cast) -> None:
    answer = member("viewer").post(
        "/admin/policy/policyversion/add/", {"org": cast.acme.pk, "toml": ALLOW_SEARCH}
    )
    assert answer.status_code == HTTPStatus.FORBIDDEN


def test_roll_back_and_diff(cast, superuser_client) -> None:
    from apps.policy.models import PolicyVersion
    from apps.policy.services import policy_deploy

    old = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    new = policy_deploy(org=cast.acme, toml=BLOCK_SEARCH).version
    detail = superuser_client.get(f"/admin/policy/policyversion/{new.pk}/change/").content
    assert "+decision = &quot;block&quot;" in detail.decode()
    superuser_client.post(
        "/admin/policy/policyversion/",
        {"action": "roll_back_to_selected", "_selected_action": [old.pk]},
    )
    assert policy_active(org=cast.acme).policy_id == old.policy_id
    assert PolicyVersion.objects.filter(org=cast.acme).count() == 2


def test_preview_from_the_console(cast, mirrored) -> None:
    answer = member("manager").post(
        "/admin/policy/policyversion/preview/",
        {"org": cast.acme.pk, "toml": BLOCK_SEARCH, "days": 7},
    )
    page = answer.content.decode()
    assert "3 of 3 decisions would change" in page
    assert policy_active(org=cast.acme).is_fail_safe
    # The per-rule table: the active (fail-safe) default against the draft's rule, with the
    # receipts linked to their pages, newest first.
    flips = re.search(r'<table[^>]*id="preview-flips".*?</table>', page, re.S)
    assert flips is not None
    row = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", flips.group(0)))
    assert "policy.default.deny_unknown search.block require_approval → block 3" in row
    links = re.findall(r'href="/admin/receipts/mirrorentry/(\d+)/change/"[^>]*>#(\d+)<', page)
    seqs = {entry.pk: entry.seq for entry in MirrorEntry.objects.filter(org=cast.acme)}
    assert [(seqs[int(pk)], int(seq)) for pk, seq in links] == [(3, 3), (2, 2), (1, 1)]


def test_a_long_preview_runs_in_the_worker_and_its_page_reloads_until_ready(
    cast, mirrored, settings
) -> None:
    from apps.policy.models import PolicyReplay
    from apps.policy.services import policy_replay_run

    settings.POLICY_REPLAY_INLINE_RECEIPTS = 2
    client = member("manager")
    answer = client.post(
        "/admin/policy/policyversion/preview/",
        {"org": cast.acme.pk, "toml": BLOCK_SEARCH, "days": 7},
    )
    replay = PolicyReplay.objects.get()
    url = f"/admin/policy/policyversion/preview/{replay.replay_id}/"
    assert (answer.status_code, answer["Location"]) == (HTTPStatus.FOUND, url)
    waiting = client.get(url).content.decode()
    assert '<meta http-equiv="refresh"' in waiting
    assert 'id="preview-status" data-status="pending"' in waiting

    policy_replay_run(replay_pk=replay.pk)  # what the queued task runs

    ready = client.get(url).content.decode()
    assert "3 of 3 decisions would change" in ready
    assert 'http-equiv="refresh"' not in ready
    # A viewer of the org does not see it (the preview is for managers).
    assert member("viewer").get(url).status_code == HTTPStatus.NOT_FOUND


# --- keys ---------------------------------------------------------------------------------------


def test_a_manager_registers_and_revokes_approver_keys(cast) -> None:
    approver = Approver("bob")
    client = member("manager")
    client.post(
        "/admin/approvals/approverkey/add/",
        {"org": cast.acme.pk, "public_key": approver.public, "key_id": "bob", "label": "Bob"},
    )
    key = ApproverKey.objects.get(key_id="bob")
    assert (key.created_via, key.created_by.username) == ("console", "acme-manager")
    client.post(
        "/admin/approvals/approverkey/",
        {"action": "revoke_selected", "_selected_action": [key.pk]},
    )
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_an_auditor_cannot_register_approver_keys(cast) -> None:
    answer = member("auditor").post(
        "/admin/approvals/approverkey/add/",
        {"org": cast.acme.pk, "public_key": Approver("c").public, "label": "C"},
    )
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert not ApproverKey.objects.exists()


def test_rotating_an_api_key_shows_the_new_secret_once_and_revokes_the_old(cast) -> None:
    old = cast.acme_key.api_key
    answer = member("manager").post(
        "/admin/tenancy/apikey/",
        {"action": "rotate_selected", "_selected_action": [old.pk]},
        follow=True,
    )
    secret = re.search(r"(hk_[0-9a-f]{12}_[A-Za-z0-9_-]+)", answer.content.decode()).group(1)
    assert api_key_authenticate(presented=secret).scopes == old.scopes
    assert api_key_authenticate(presented=cast.acme_key.secret) is None
    assert ApiKey.objects.get(pk=old.pk).revoked_at is not None


# --- the admin log, session tokens ---------------------------------------------------------


def test_the_audit_trail_records_console_actions_and_nobody_can_edit_it(
    cast, superuser_client
) -> None:
    superuser_client.post(
        "/admin/tenancy/apikey/",
        {"action": "revoke_selected", "_selected_action": [cast.acme_key.api_key.pk]},
    )
    event = OrgAuditEvent.objects.get(kind="api_key.revoked")
    assert (event.org, event.via, event.actor) == (cast.acme, "console", "root")
    assert superuser_client.get("/admin/tenancy/orgauditevent/").status_code == HTTPStatus.OK
    url = f"/admin/tenancy/orgauditevent/{event.pk}"
    assert superuser_client.get(f"{url}/delete/").status_code == 403
    superuser_client.post(f"{url}/change/", {"summary": "nothing happened"})
    assert OrgAuditEvent.objects.get(pk=event.pk).summary == event.summary


def test_a_member_gets_a_session_token_for_scripts(cast) -> None:
    from rest_framework.test import APIClient

    page = member("auditor").post(f"/admin/tenancy/org/{cast.acme.pk}/session-token/")
    assert page.status_code == HTTPStatus.OK
    access = re.search(r"one-time-secret\">([\w.-]+)</code>", page.content.decode()).group(1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {access}")
    assert api.get("/v1/audit/chain").status_code == HTTPStatus.OK
    assert (
        member("auditor").get(f"/admin/tenancy/org/{cast.acme.pk}/session-token/").status_code
        == HTTPStatus.METHOD_NOT_ALLOWED
    )
