"""The dashboard plane's webhook, notification and background export routes: the
authorization matrix, the secret shown once, rotation, the delivery log and redelivery."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from apps.events.models import Delivery, EmailSubscription, WebhookEndpoint
from apps.events.services import webhook_endpoint_create
from apps.policy.services import policy_deploy
from tests.events.conftest import fan_out
from tests.policy.test_policy_api import rule_toml

HOOK = {"url": "http://127.0.0.1:9/hook", "event_types": ["policy.deployed"]}


@pytest.fixture
def acme_endpoint(cast) -> WebhookEndpoint:
    return webhook_endpoint_create(org=cast.acme, url=HOOK["url"], event_types=HOOK["event_types"])


@pytest.fixture
def globex_endpoint(cast) -> WebhookEndpoint:
    return webhook_endpoint_create(
        org=cast.globex, url=HOOK["url"], event_types=["api_key.created"]
    )


def test_no_credential_is_401_and_an_api_key_is_401(cast) -> None:
    assert APIClient().get("/v1/webhooks").status_code == HTTPStatus.UNAUTHORIZED
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    assert client.get("/v1/webhooks").status_code == HTTPStatus.UNAUTHORIZED


@pytest.mark.parametrize(
    ("role", "read", "write"),
    [("viewer", 403, 403), ("auditor", 200, 403), ("manager", 200, 201), ("owner", 200, 201)],
)
def test_auditors_read_and_managers_change_endpoints(cast, dashboard, role, read, write) -> None:
    client = dashboard(role)
    assert client.get("/v1/webhooks").status_code == read
    assert client.post("/v1/webhooks", HOOK, format="json").status_code == write


def test_the_secret_is_shown_once_at_creation(cast, dashboard) -> None:
    client = dashboard("manager")
    created = client.post("/v1/webhooks", {**HOOK, "format": "slack"}, format="json").json()
    assert created["secret"].startswith("whsec_")
    assert created["format"] == "slack"
    assert created["enabled"] is True
    listed = client.get("/v1/webhooks").json()
    assert [item["id"] for item in listed] == [created["id"]]
    assert "secret" not in listed[0]
    assert "secret" not in client.get(f"/v1/webhooks/{created['id']}").json()
    assert created["secret"] not in client.get(f"/v1/webhooks/{created['id']}").content.decode()


@pytest.mark.parametrize(
    "body",
    [
        {"url": "http://127.0.0.1:9/", "event_types": []},
        {"url": "http://127.0.0.1:9/", "event_types": ["nope"]},
        {"url": "not a url", "event_types": ["policy.deployed"]},
        {"url": "ftp://127.0.0.1/", "event_types": ["policy.deployed"]},
        {"url": "http://127.0.0.1:9/", "event_types": ["policy.deployed"], "format": "xml"},
        {"event_types": ["policy.deployed"]},
        ["not", "an", "object"],
    ],
)
def test_bad_endpoints_are_422(cast, dashboard, body) -> None:
    response = dashboard("manager").post("/v1/webhooks", body, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "detail" in response.json()
    assert not WebhookEndpoint.objects.exists()


def test_another_orgs_endpoint_is_404(cast, dashboard, globex_endpoint) -> None:
    client = dashboard("owner")
    for method, path in [
        ("get", f"/v1/webhooks/{globex_endpoint.endpoint_id}"),
        ("patch", f"/v1/webhooks/{globex_endpoint.endpoint_id}"),
        ("delete", f"/v1/webhooks/{globex_endpoint.endpoint_id}"),
        ("post", f"/v1/webhooks/{globex_endpoint.endpoint_id}/rotate-secret"),
        ("get", f"/v1/webhooks/{globex_endpoint.endpoint_id}/deliveries"),
    ]:
        response = getattr(client, method)(path, {}, format="json")
        assert response.status_code == HTTPStatus.NOT_FOUND, (method, path)
    assert WebhookEndpoint.objects.filter(pk=globex_endpoint.pk, enabled=True).exists()


def test_update_disable_enable_and_delete(cast, dashboard, acme_endpoint) -> None:
    client = dashboard("manager")
    path = f"/v1/webhooks/{acme_endpoint.endpoint_id}"
    changed = client.patch(path, {"enabled": False, "event_types": ["approval.decided"]},
                           format="json").json()  # fmt: skip
    assert (changed["enabled"], changed["event_types"]) == (False, ["approval.decided"])
    WebhookEndpoint.objects.filter(pk=acme_endpoint.pk).update(consecutive_failures=9)
    assert client.patch(path, {"enabled": True}, format="json").json()["consecutive_failures"] == 0
    assert dashboard("auditor").delete(path).status_code == HTTPStatus.FORBIDDEN
    assert client.delete(path).json()["id"] == acme_endpoint.endpoint_id
    assert client.get(path).status_code == HTTPStatus.NOT_FOUND


def test_rotation_shows_the_new_secret_once_and_both_sign(cast, dashboard, acme_endpoint) -> None:
    old = acme_endpoint.secret
    response = dashboard("manager").post(f"/v1/webhooks/{acme_endpoint.endpoint_id}/rotate-secret")
    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert body["secret"] != old
    assert body["rotating"] is True
    acme_endpoint.refresh_from_db()
    assert (acme_endpoint.secret, acme_endpoint.previous_secret) == (body["secret"], old)
    assert (
        dashboard("auditor")
        .post(f"/v1/webhooks/{acme_endpoint.endpoint_id}/rotate-secret")
        .status_code
        == HTTPStatus.FORBIDDEN
    )


def test_the_delivery_log_and_redeliver(cast, dashboard, acme_endpoint) -> None:
    policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))
    fan_out()
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(
        status="failed", attempts=3, last_status_code=500
    )
    path = f"/v1/webhooks/{acme_endpoint.endpoint_id}/deliveries"

    [item] = dashboard("auditor").get(path).json()
    assert (item["status"], item["attempts"], item["last_status_code"]) == ("failed", 3, 500)
    assert item["event"]["type"] == "policy.deployed"
    assert item["event"]["data"]["policy_hash"]

    assert dashboard("auditor").post(f"{path}/{delivery.pk}/redeliver").status_code == 403
    response = dashboard("manager").post(f"{path}/{delivery.pk}/redeliver")
    assert response.status_code == HTTPStatus.ACCEPTED
    assert response.json()["status"] == "pending"
    assert dashboard("manager").post(f"{path}/999999/redeliver").status_code == 404


def test_members_opt_in_to_approval_emails_for_themselves(cast, dashboard) -> None:
    client = dashboard("viewer")
    assert client.get("/v1/notifications/email").json() == {"event_types": []}
    wanted = ["approval.waiting_for_approvers", "approval.decided"]
    response = client.put("/v1/notifications/email", {"event_types": wanted}, format="json")
    assert response.json() == {"event_types": sorted(wanted)}
    assert EmailSubscription.objects.filter(user__username="acme-viewer").count() == 2
    assert dashboard("owner").get("/v1/notifications/email").json() == {"event_types": []}
    refused = client.put(
        "/v1/notifications/email", {"event_types": ["policy.deployed"]}, format="json"
    )
    assert refused.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert client.put("/v1/notifications/email", {"event_types": []}, format="json").json() == {
        "event_types": []
    }


def test_the_openapi_document_describes_every_event_payload(cast) -> None:
    from apps.api.openapi import profile_document

    for profile in ("keyscoped", "teampath"):
        schemas = profile_document(profile)["components"]["schemas"]
        mapping = schemas["WebhookEvent"]["discriminator"]["mapping"]
        assert sorted(mapping) == sorted(
            [
                "approval.opened", "approval.waiting_for_approvers", "approval.vote_recorded",
                "approval.decided", "approval.reminder", "approval.escalated", "receipt.refused",
                "policy.deployed", "policy.break_glass", "policy.stale_agents", "quota.threshold",
                "api_key.created", "api_key.revoked", "transparency.alert",
                "receipts.archived", "receipts.retired", "legal_hold.set", "legal_hold.released",
            ]
        )  # fmt: skip
        assert "signing_url" in schemas["ApprovalWaitingEvent"]["properties"]
    paths = profile_document("keyscoped")["paths"]
    assert "/v1/webhooks" in paths
    assert "/v1/evidence/exports" in paths


def test_api_endpoint_acts_are_recorded_in_the_org_audit_trail(cast, dashboard, acme_endpoint):
    from apps.tenancy.models import AuditKind, OrgAuditEvent

    client = dashboard("manager")
    path = f"/v1/webhooks/{acme_endpoint.endpoint_id}"
    assert client.post(f"{path}/rotate-secret").status_code == HTTPStatus.OK
    assert client.patch(path, {"enabled": False}, format="json").status_code == HTTPStatus.OK
    assert client.patch(path, {"enabled": True}, format="json").status_code == HTTPStatus.OK
    trail = list(
        OrgAuditEvent.objects.filter(org=cast.acme, kind__startswith="webhook_endpoint.")
        .order_by("id")
        .values_list("kind", "via", "actor")
    )
    assert trail == [
        (AuditKind.WEBHOOK_SECRET_ROTATED, "api", "acme-manager"),
        (AuditKind.WEBHOOK_ENDPOINT_DISABLED, "api", "acme-manager"),
        (AuditKind.WEBHOOK_ENDPOINT_ENABLED, "api", "acme-manager"),
    ]
