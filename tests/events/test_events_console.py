"""The console's event pages: managers add endpoints (the secret shown once), rotate and
redeliver; viewers and auditors only look; members manage their own email opt-ins."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.events.models import Delivery, EmailSubscription, WebhookEndpoint
from apps.events.services import webhook_endpoint_create
from apps.policy.services import policy_deploy
from tests.events.conftest import fan_out
from tests.policy.test_policy_api import rule_toml

ADD = "/admin/events/webhookendpoint/add/"
LIST = "/admin/events/webhookendpoint/"


def member(role: str, org: str = "acme") -> Client:
    client = Client()
    assert client.login(username=f"{org}-{role}", password=f"pw-{role}")
    return client


def _form(cast, **extra):
    return {
        "org": cast.acme.pk,
        "url": "http://127.0.0.1:9/hook",
        "description": "pager",
        "event_types": ["approval.waiting_for_approvers", "approval.decided"],
        "format": "standard",
        "enabled": "on",
        **extra,
    }


def test_a_manager_adds_an_endpoint_and_sees_its_secret_once(cast) -> None:
    client = member("manager")
    response = client.post(ADD, _form(cast))
    assert response.status_code == HTTPStatus.OK
    endpoint = WebhookEndpoint.objects.get()
    page = response.content.decode()
    assert endpoint.secret in page
    assert "not shown again" in page
    assert "no-store" in response["Cache-Control"]
    assert endpoint.event_types == ["approval.decided", "approval.waiting_for_approvers"]
    change = client.get(f"{LIST}{endpoint.pk}/change/")
    assert change.status_code == HTTPStatus.OK
    assert endpoint.secret not in change.content.decode()
    assert endpoint.secret not in client.get(LIST).content.decode()


@pytest.mark.parametrize("role", ["viewer", "auditor"])
def test_viewers_and_auditors_cannot_add_endpoints(cast, role) -> None:
    client = member(role)
    assert client.get(ADD).status_code == HTTPStatus.FORBIDDEN
    assert client.post(ADD, _form(cast)).status_code == HTTPStatus.FORBIDDEN
    assert not WebhookEndpoint.objects.exists()


def test_a_private_url_is_refused_on_the_form_in_production(cast, settings) -> None:
    settings.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS = False
    response = member("manager").post(ADD, _form(cast, url="http://169.254.169.254/x"), follow=True)
    assert "not a public destination" in response.content.decode()
    assert not WebhookEndpoint.objects.exists()


def test_another_orgs_endpoint_is_invisible(cast) -> None:
    theirs = webhook_endpoint_create(
        org=cast.globex, url="http://127.0.0.1:9/x", event_types=["policy.deployed"]
    )
    client = member("owner")
    assert theirs.url not in client.get(LIST).content.decode()
    assert client.get(f"{LIST}{theirs.pk}/change/").status_code in (302, 404)


def test_rotation_and_redelivery_from_the_console(cast) -> None:
    endpoint = webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/hook", event_types=["policy.deployed"]
    )
    old = endpoint.secret
    client = member("manager")
    response = client.post(LIST, {"action": "rotate_secret", "_selected_action": [endpoint.pk]})
    endpoint.refresh_from_db()
    assert endpoint.secret != old
    assert endpoint.previous_secret == old
    assert endpoint.secret in response.content.decode()

    policy_deploy(org=cast.acme, toml=rule_toml("a", "tool_call", "allow"))
    fan_out()
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(status="failed")
    log = client.get(f"/admin/events/delivery/?endpoint__id__exact={endpoint.pk}")
    assert log.status_code == HTTPStatus.OK
    assert "policy.deployed" in log.content.decode()
    viewer = member("viewer")
    viewer.post(
        "/admin/events/delivery/", {"action": "redeliver", "_selected_action": [delivery.pk]}
    )
    assert Delivery.objects.get().status == "failed"
    client.post(
        "/admin/events/delivery/", {"action": "redeliver", "_selected_action": [delivery.pk]}
    )
    assert Delivery.objects.get().status == "pending"


def test_a_member_opts_in_to_email_for_themselves_only(cast) -> None:
    client = member("viewer")
    response = client.post(
        "/admin/events/emailsubscription/add/",
        {"org": cast.acme.pk, "event_type": "approval.waiting_for_approvers"},
    )
    assert response.status_code == HTTPStatus.FOUND
    [subscription] = EmailSubscription.objects.all()
    assert subscription.user.username == "acme-viewer"
    assert (
        "approval.waiting_for_approvers"
        not in member("owner").get("/admin/events/emailsubscription/").content.decode()
    )


def test_console_endpoint_acts_are_recorded_in_the_org_audit_trail(cast) -> None:
    from apps.tenancy.models import AuditKind, OrgAuditEvent

    endpoint = webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/hook", event_types=["policy.deployed"]
    )
    client = member("manager")
    selected = {"_selected_action": [endpoint.pk]}
    client.post(LIST, {"action": "rotate_secret", **selected})
    client.post(LIST, {"action": "disable_selected", **selected})
    client.post(LIST, {"action": "enable_selected", **selected})
    client.post(LIST, {"action": "enable_selected", **selected})  # on already: no change

    trail = list(
        OrgAuditEvent.objects.filter(org=cast.acme, kind__startswith="webhook_endpoint.")
        .order_by("id")
        .values_list("kind", "via", "actor", "detail")
    )
    detail = {"endpoint_id": endpoint.endpoint_id}
    assert trail == [
        (AuditKind.WEBHOOK_SECRET_ROTATED, "console", "acme-manager", detail),
        (AuditKind.WEBHOOK_ENDPOINT_DISABLED, "console", "acme-manager", detail),
        (AuditKind.WEBHOOK_ENDPOINT_ENABLED, "console", "acme-manager", detail),
    ]


def test_another_orgs_deliveries_are_not_listed_however_asked_for(cast) -> None:
    """The delivery log pages by endpoint; a member naming another org, its endpoint or its
    webhook-id gets an empty list, not that org's deliveries."""
    theirs = webhook_endpoint_create(
        org=cast.globex, url="http://127.0.0.1:9/x", event_types=["policy.deployed"]
    )
    policy_deploy(org=cast.globex, toml=rule_toml("g", "tool_call", "allow"))
    fan_out()
    delivery = Delivery.objects.get(endpoint=theirs)
    client = member("owner")
    for params in (
        {"org": cast.globex.pk},
        {"org": cast.globex.pk, "endpoint__id__exact": theirs.pk},
        {"q": theirs.endpoint_id},
        {"org": cast.globex.pk, "q": delivery.event.event_id},
    ):
        page = client.get("/admin/events/delivery/", params)
        assert page.status_code == HTTPStatus.OK, params
        assert f"/admin/events/delivery/{delivery.pk}/change/" not in page.content.decode()
    # Whoever may see it sees it there.
    root = Client()
    root.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    own = root.get(
        "/admin/events/delivery/", {"org": cast.globex.pk, "endpoint__id__exact": theirs.pk}
    )
    assert f"/admin/events/delivery/{delivery.pk}/change/" in own.content.decode()
