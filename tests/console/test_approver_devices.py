"""The approver's devices page (``/approve/``): a signed-in member enrolls the key their
browser holds (a non-extractable WebCrypto key signing a one-time challenge), an owner or
manager confirms it in the console, the member votes with it from the browser, revokes it
and enrolls a replacement for a lost device. Plus the JSON endpoints' refusals."""

from __future__ import annotations

import base64
import json
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.test import Client

from apps.approvals.models import ROSTER_RULE, ApproverKey
from apps.approvals.selectors import approval_get
from apps.approvals.services import approval_open, enrollment_message
from apps.tenancy.models import AuditKind, Org, OrgAuditEvent
from apps.tenancy.org_context import activate_default
from tests.approvals.conftest import Approver
from tests.console.test_approve_page import login, stored_content, suspended_receipt
from tests.receipts.factories import Agent


class SingleSignOnBackend(ModelBackend):
    """Stands for the console's single sign-on backend: what the rule reads is its flag."""

    single_sign_on = True


def client_for(username: str, backend: str | None = None) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username), backend=backend)
    activate_default()
    return client


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


def enroll_over_http(client: Client, org: Org, device: Approver, **extra: Any) -> Any:
    challenge = post(client, "/approve/devices/challenge", {}).json()["challenge"]
    message = enrollment_message(org=org, challenge=challenge, public_key=device.public)
    body = {
        "org": org.slug,
        "label": "work laptop",
        "public_key": device.public,
        "signature": base64.b64encode(device.key.sign(message).signature).decode(),
        **extra,
    }
    return post(client, "/approve/devices", body)


@pytest.mark.django_db
def test_the_device_endpoints_need_a_signed_in_member_and_their_own_keys(cast) -> None:
    anonymous = Client()
    answer = post(anonymous, "/approve/devices/challenge", {})
    assert answer.status_code == HTTPStatus.UNAUTHORIZED
    assert answer.json()["error"] == "not_signed_in"

    viewer = client_for("acme-viewer")
    device = Approver("device")
    # Not a member of globex: as if it did not exist.
    refused = enroll_over_http(viewer, cast.globex, device)
    assert refused.status_code == HTTPStatus.NOT_FOUND
    # A challenge is used once: the same proof again is refused.
    challenge = post(viewer, "/approve/devices/challenge", {}).json()["challenge"]
    message = enrollment_message(org=cast.acme, challenge=challenge, public_key=device.public)
    signature = base64.b64encode(device.key.sign(message).signature).decode()
    body = {"org": "acme", "label": "laptop", "public_key": device.public, "signature": signature}
    first = post(viewer, "/approve/devices", body)
    assert first.status_code == HTTPStatus.CREATED, first.content
    assert first.json()["state"] == "pending"
    again = post(viewer, "/approve/devices", {**body, "public_key": Approver("x").public})
    assert again.status_code == HTTPStatus.CONFLICT
    assert "no enrollment challenge" in again.json()["message"]
    # Bad bodies are a clear 400, never a 500.
    for bad in ([], {"org": "acme"}, {**body, "replaces": "lost"}, {**body, "extra": 1}):
        post(viewer, "/approve/devices/challenge", {})
        answer = post(viewer, "/approve/devices", bad)
        assert answer.status_code in (HTTPStatus.BAD_REQUEST, HTTPStatus.UNPROCESSABLE_ENTITY)
        assert answer.json()["message"]
    key = ApproverKey.objects.get(public_key=device.public)
    # Another member cannot label or revoke it.
    auditor = client_for("acme-auditor")
    for action, payload in (("label", {"label": "mine"}), ("revoke", {})):
        answer = post(auditor, f"/approve/devices/{key.pk}/{action}", payload)
        assert answer.status_code == HTTPStatus.NOT_FOUND
    assert post(viewer, f"/approve/devices/{key.pk}/label", {"label": ""}).status_code in (
        HTTPStatus.BAD_REQUEST, HTTPStatus.UNPROCESSABLE_ENTITY,
    )  # fmt: skip
    assert post(viewer, f"/approve/devices/{key.pk}/label", {"label": "desk"}).json()["label"] == (
        "desk"
    )
    assert post(viewer, f"/approve/devices/{key.pk}/revoke", {}).json()["state"] == "revoked"


@pytest.mark.django_db
def test_a_viewer_cannot_confirm_keys_and_a_manager_can(cast) -> None:
    viewer = client_for("acme-viewer")
    assert enroll_over_http(viewer, cast.acme, Approver("d")).status_code == HTTPStatus.CREATED
    key = ApproverKey.objects.get()
    url = "/admin/approvals/approverkey/"
    form = {"action": "confirm_selected", "_selected_action": [key.pk]}
    viewer.post(url, form)
    assert ApproverKey.objects.get().state == "pending"
    client_for("acme-manager").post(url, form)
    assert ApproverKey.objects.get().state == "active"
    assert OrgAuditEvent.objects.filter(kind=AuditKind.APPROVER_KEY_CONFIRMED).count() == 1


@pytest.mark.django_db
def test_a_single_sign_on_session_confirms_at_once_where_the_org_says_so(cast, settings) -> None:
    backend = f"{__name__}.SingleSignOnBackend"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    Org.objects.filter(pk=cast.acme.pk).update(confirm_sso_approver_keys=True)
    password = client_for("acme-viewer")
    assert enroll_over_http(password, cast.acme, Approver("a")).json()["state"] == "pending"
    sso = client_for("acme-viewer", backend=backend)
    assert enroll_over_http(sso, cast.acme, Approver("b")).json()["state"] == "active"


def enroll_in_browser(page: Any, live_server: Any, label: str, replaces: str = "") -> None:
    page.goto(f"{live_server.url}/approve/")
    page.wait_for_selector("body[data-devices='ready']")
    page.fill("#enroll-label", label)
    if replaces:
        page.select_option("#enroll-replaces", label=replaces)
    page.click("#enroll-key")
    page.wait_for_selector(f"#device-list input.device-label[value='{label}']")


def test_a_device_is_enrolled_confirmed_used_to_vote_revoked_and_replaced(
    cast, browser, live_server
) -> None:
    first_browser = browser.new_context()
    page = first_browser.new_page()
    page.set_default_timeout(30_000)
    login(page, live_server, "acme-viewer")
    page.goto(f"{live_server.url}/approve/")
    assert ROSTER_RULE in page.inner_text("#roster-rule")
    assert "register_approver_key" not in page.content()  # nobody is sent to an operator
    enroll_in_browser(page, live_server, "work laptop")
    row = page.locator("#device-list tbody tr").first
    assert "pending confirmation" in row.inner_text()
    assert row.locator(".this-browser").is_visible()
    key = ApproverKey.objects.get()
    assert key.public_key == page.evaluate("() => window.mirrorApprover.publicKey()")
    assert key.member.username == "acme-viewer"  # type: ignore[union-attr]

    # Before confirmation the signing page says why this browser cannot vote yet.
    content = stored_content(suspended_receipt(Agent()))
    approval = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content
    ).approval
    page.goto(f"{live_server.url}/approve/{approval.approval_id}")
    page.wait_for_selector("body[data-ready='no']")
    assert "waits for an owner or manager to confirm it" in page.inner_text("#vote-result")

    # An owner or manager confirms it in the console.
    client_for("acme-manager").post(
        "/admin/approvals/approverkey/",
        {"action": "confirm_selected", "_selected_action": [key.pk]},
    )
    page.goto(f"{live_server.url}/approve/{approval.approval_id}")
    page.wait_for_selector("body[data-ready='yes']")
    assert "acme-viewer (work laptop)" in page.inner_text("#approval")
    page.click("#approve")
    page.wait_for_selector("#vote-result[data-outcome='recorded']")
    decided = approval_get(org=cast.acme, action_hash=approval.action_hash)
    assert decided.status == "approved"
    assert decided.votes.get().approver_key_id == key.pk

    # Relabel, then the laptop is lost: a new browser enrolls its replacement.
    page.goto(f"{live_server.url}/approve/")
    page.wait_for_selector("body[data-devices='ready']")
    page.fill("#device-list input.device-label", "old laptop")
    page.click("#device-list .save-label")
    page.wait_for_selector("#device-result[data-outcome='saved']")
    assert ApproverKey.objects.get(pk=key.pk).label == "old laptop"
    first_browser.close()

    second_browser = browser.new_context()
    new = second_browser.new_page()
    new.set_default_timeout(30_000)
    login(new, live_server, "acme-viewer")
    enroll_in_browser(
        new, live_server, "new laptop", replaces="old laptop (acme): lost or retired, revoke it now"
    )
    assert ApproverKey.objects.get(pk=key.pk).state == "revoked"
    replacement = ApproverKey.objects.get(label="new laptop")
    assert replacement.state == "pending"
    assert replacement.public_key != key.public_key
    states = new.locator("#device-list tbody tr").all_inner_texts()
    assert any("revoked" in row for row in states)
    # And a device the member retires themselves: revoked from its own row.
    new.locator("#device-list tr[data-state='pending'] .revoke-key").click()
    new.wait_for_selector("#device-list tr[data-state='revoked'] >> nth=1")
    assert ApproverKey.objects.get(pk=replacement.pk).state == "revoked"
    second_browser.close()
