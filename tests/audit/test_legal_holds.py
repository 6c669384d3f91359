"""Legal holds: only owners set and release them (the dashboard API, the console, the
service itself; an operator's command too), each set and release is in the org's audit
trail and sent as an event, and the API answers bad input in the profile's error body."""

from __future__ import annotations

import json
from datetime import date
from http import HTTPStatus
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from apps.audit.holds import HoldReleased, legal_hold_release, legal_hold_set
from apps.audit.models import HoldScope, LegalHold
from apps.common.errors import Forbidden, InvalidInput
from apps.events.models import Event
from apps.events.services import webhook_endpoint_create
from apps.events.subscriptions import forget_subscribers
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import AuditKind, OrgAuditEvent, Role

pytestmark = pytest.mark.django_db

HOLD_EVENTS = ["legal_hold.set", "legal_hold.released"]
REFUSED_ROLES = [Role.MANAGER, Role.AUDITOR, Role.VIEWER]


def user(name: str):
    return get_user_model().objects.get(username=name)


@pytest.fixture
def subscribed(cast):
    endpoint = webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/hooks", event_types=HOLD_EVENTS
    )
    forget_subscribers()
    yield endpoint
    forget_subscribers()


def trail(org, kind: str) -> list[OrgAuditEvent]:
    return list(OrgAuditEvent.objects.filter(org=org, kind=kind).order_by("id"))


def events(org) -> list[Event]:
    return list(Event.objects.filter(org=org).order_by("id"))


# --- the dashboard API -----------------------------------------------------------------


def test_an_owner_sets_and_releases_a_hold_with_its_audit_records_and_events(
    cast, dashboard, subscribed
) -> None:
    client = dashboard("owner")
    body = {"scope": "range", "from": "2026-03-01", "to": "2026-03-31", "reason": "Case 12-A"}
    answer = client.post("/v1/legal-holds", body, format="json")
    assert answer.status_code == HTTPStatus.CREATED, answer.content
    hold = answer.json()
    assert hold["id"].startswith("hold_")
    assert (hold["scope"], hold["from"], hold["to"], hold["session_id"]) == (
        "range", "2026-03-01", "2026-03-31", None,
    )  # fmt: skip
    assert (hold["reason"], hold["active"], hold["set_by"]) == ("Case 12-A", True, "acme-owner")
    assert hold["released_at"] is None

    [set_record] = trail(cast.acme, AuditKind.LEGAL_HOLD_SET)
    assert (set_record.via, set_record.actor, set_record.user) == (
        "api", "acme-owner", user("acme-owner"),
    )  # fmt: skip
    assert set_record.detail["hold_id"] == hold["id"]
    assert "Case 12-A" in set_record.summary

    released = client.post(
        f"/v1/legal-holds/{hold['id']}/release", {"reason": "Case closed"}, format="json"
    )
    assert released.status_code == HTTPStatus.OK, released.content
    assert released.json()["active"] is False
    assert released.json()["released_by"] == "acme-owner"
    assert released.json()["release_reason"] == "Case closed"
    [release_record] = trail(cast.acme, AuditKind.LEGAL_HOLD_RELEASED)
    assert release_record.detail["release_reason"] == "Case closed"

    recorded = events(cast.acme)
    assert [event.type for event in recorded] == HOLD_EVENTS
    assert recorded[0].payload["hold_id"] == hold["id"]
    assert recorded[0].payload["from"] == "2026-03-01"
    assert recorded[0].payload["released_at"] is None
    assert recorded[1].payload["release_reason"] == "Case closed"
    assert recorded[1].payload["released_by"] == "acme-owner"

    listed = client.get("/v1/legal-holds").json()
    assert [(each["id"], each["active"]) for each in listed] == [(hold["id"], False)]


@pytest.mark.parametrize("role", REFUSED_ROLES, ids=str)
def test_other_roles_cannot_set_a_hold(cast, dashboard, subscribed, role) -> None:
    answer = dashboard(role.value).post(
        "/v1/legal-holds", {"scope": "org", "reason": "Case 12-A"}, format="json"
    )
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert answer.json() == {"detail": "this endpoint needs the owner role or higher"}
    assert not LegalHold.objects.exists()
    assert trail(cast.acme, AuditKind.LEGAL_HOLD_SET) == []
    assert events(cast.acme) == []


@pytest.mark.parametrize("role", REFUSED_ROLES, ids=str)
def test_other_roles_cannot_release_a_hold(cast, dashboard, subscribed, role) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case 12-A")
    answer = dashboard(role.value).post(
        f"/v1/legal-holds/{hold.hold_id}/release", {"reason": "done"}, format="json"
    )
    assert answer.status_code == HTTPStatus.FORBIDDEN
    assert answer.json() == {"detail": "this endpoint needs the owner role or higher"}
    hold.refresh_from_db()
    assert hold.is_active
    assert trail(cast.acme, AuditKind.LEGAL_HOLD_RELEASED) == []
    assert [event.type for event in events(cast.acme)] == ["legal_hold.set"]


def test_auditors_read_the_holds_and_viewers_do_not(cast, dashboard) -> None:
    legal_hold_set(org=cast.acme, scope=HoldScope.SESSION, session_id="s-1", reason="Case 7")
    listed = dashboard("auditor").get("/v1/legal-holds")
    assert listed.status_code == HTTPStatus.OK
    assert [(each["scope"], each["session_id"]) for each in listed.json()] == [("session", "s-1")]
    refused = dashboard("viewer").get("/v1/legal-holds")
    assert refused.status_code == HTTPStatus.FORBIDDEN
    assert set(refused.json()) == {"detail"}


def test_without_a_session_token_the_routes_answer_401(cast, api_client) -> None:
    assert api_client.get("/v1/legal-holds").status_code == HTTPStatus.UNAUTHORIZED
    api_client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)  # the other plane's credential
    answer = api_client.post("/v1/legal-holds", {"scope": "org", "reason": "x"}, format="json")
    assert answer.status_code == HTTPStatus.UNAUTHORIZED
    assert set(answer.json()) == {"detail"}


def test_another_orgs_hold_is_404_and_a_second_release_409(cast, dashboard) -> None:
    theirs = legal_hold_set(org=cast.globex, scope=HoldScope.ORG, reason="Globex case")
    client = dashboard("owner")
    answer = client.post(f"/v1/legal-holds/{theirs.hold_id}/release", {"reason": "x"},
                         format="json")  # fmt: skip
    assert answer.status_code == HTTPStatus.NOT_FOUND
    assert set(answer.json()) == {"detail"}
    theirs.refresh_from_db()
    assert theirs.is_active
    assert client.get("/v1/legal-holds").json() == []

    ours = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Acme case")
    path = f"/v1/legal-holds/{ours.hold_id}/release"
    assert client.post(path, {"reason": "done"}, format="json").status_code == HTTPStatus.OK
    again = client.post(path, {"reason": "done again"}, format="json")
    assert again.status_code == HTTPStatus.CONFLICT
    assert "was released at" in again.json()["detail"]
    assert len(trail(cast.acme, AuditKind.LEGAL_HOLD_RELEASED)) == 1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"scope": "range", "reason": "x"}, "a range hold needs from, to or both"),
        ({"scope": "range", "from": "2026-03-02", "to": "2026-03-01", "reason": "x"},
         "from: must not be after to"),
        ({"scope": "range", "from": "March", "reason": "x"}, "from: a date YYYY-MM-DD"),
        ({"scope": "org", "session_id": "s-1", "reason": "x"}, "an org-wide hold takes no"),
        ({"scope": "session", "reason": "x"}, "a session hold needs session_id"),
        ({"scope": "session", "session_id": "s", "to": "2026-03-01", "reason": "x"},
         "a session hold takes no from or to"),
        ({"scope": "org", "reason": "   "}, "reason: "),
        ({"scope": "org"}, "reason"),
        ({"scope": "everything", "reason": "x"}, "scope"),
        ({"scope": "org", "reason": "x", "until": "2027-01-01"}, "unknown member(s): until"),
        ({"scope": "org", "reason": 7}, "reason"),
        (["org"], "the body must be a JSON object"),
    ],
)  # fmt: skip
def test_bad_input_is_422_in_the_profiles_error_body(cast, dashboard, body, words) -> None:
    answer = dashboard("owner").post("/v1/legal-holds", body, format="json")
    assert answer.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, answer.content
    assert set(answer.json()) == {"detail"}
    assert words in answer.json()["detail"]
    assert not LegalHold.objects.exists()


def test_a_release_needs_a_reason(cast, dashboard) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    path = f"/v1/legal-holds/{hold.hold_id}/release"
    for body in ({}, {"reason": ""}, {"reason": "x", "force": True}, None):
        answer = dashboard("owner").post(path, body, format="json")
        assert answer.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, (body, answer.content)
        assert set(answer.json()) == {"detail"}
    hold.refresh_from_db()
    assert hold.is_active


# --- the service: whoever calls it ------------------------------------------------------


@pytest.mark.parametrize("role", REFUSED_ROLES, ids=str)
def test_the_service_refuses_a_member_below_owner_whatever_the_surface(cast, role) -> None:
    member = Actor.console(user(f"acme-{role.value}"))
    with pytest.raises(Forbidden, match="needs the owner role"):
        legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case", actor=member)
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    with pytest.raises(Forbidden, match="needs the owner role"):
        legal_hold_release(hold=hold, reason="done", actor=member)
    assert LegalHold.objects.get().is_active


def test_an_owner_of_another_org_and_an_api_key_are_refused(cast) -> None:
    stranger = Actor.console(user("acme-owner"))
    with pytest.raises(Forbidden):
        legal_hold_set(org=cast.globex, scope=HoldScope.ORG, reason="Case", actor=stranger)
    with pytest.raises(Forbidden):
        legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case",
                       actor=Actor.api(api_key=cast.acme_key.api_key))  # fmt: skip
    assert not LegalHold.objects.exists()


def test_the_database_refuses_a_hold_whose_scope_and_members_disagree(cast) -> None:
    from django.db import IntegrityError, transaction
    from django.utils import timezone

    with pytest.raises(IntegrityError), transaction.atomic():
        LegalHold.objects.create(org=cast.acme, hold_id="hold_bad", scope=HoldScope.ORG,
                                 session_id="s-1", reason="x", set_at=timezone.now())  # fmt: skip
    with pytest.raises(InvalidInput):
        legal_hold_set(org=cast.acme, scope=HoldScope.RANGE, reason="x",
                       range_start=date(2026, 3, 2), range_end=date(2026, 3, 1))  # fmt: skip


# --- the command ------------------------------------------------------------------------


def test_the_command_sets_lists_and_releases_with_its_actor(cast, subscribed) -> None:
    out = StringIO()
    call_command("legal_hold", "set", "acme", "--scope", "session", "--session", "s-9",
                 "--reason", "Regulator request 4", "--actor", "ops-bob", stdout=out)  # fmt: skip
    placed = json.loads(out.getvalue())
    assert (placed["scope"], placed["session_id"], placed["set_by"]) == (
        "session",
        "s-9",
        "ops-bob",
    )
    [record] = trail(cast.acme, AuditKind.LEGAL_HOLD_SET)
    assert (record.via, record.actor, record.user) == ("command", "ops-bob", None)

    out = StringIO()
    call_command("legal_hold", "list", "acme", "--active", stdout=out)
    assert [json.loads(line)["hold_id"] for line in out.getvalue().splitlines()] == [
        placed["hold_id"]
    ]

    out = StringIO()
    call_command("legal_hold", "release", placed["hold_id"], "--reason", "answered",
                 "--actor", "ops-bob", stdout=out)  # fmt: skip
    assert json.loads(out.getvalue())["released_by"] == "ops-bob"
    assert trail(cast.acme, AuditKind.LEGAL_HOLD_RELEASED)[0].actor == "ops-bob"
    assert [event.type for event in events(cast.acme)] == HOLD_EVENTS

    out = StringIO()
    call_command("legal_hold", "list", "acme", "--active", stdout=out)
    assert out.getvalue() == ""
    with pytest.raises(CommandError, match="was released at"):
        call_command("legal_hold", "release", placed["hold_id"], "--reason", "again")
    with pytest.raises(CommandError, match="a range hold needs"):
        call_command("legal_hold", "set", "acme", "--scope", "range", "--reason", "x")
    with pytest.raises(CommandError, match="no legal hold"):
        call_command("legal_hold", "release", "hold_nope", "--reason", "x")


def test_a_released_hold_cannot_be_released_again_by_the_service(cast) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    legal_hold_release(hold=hold, reason="done")
    with pytest.raises(HoldReleased):
        legal_hold_release(hold=hold, reason="done")


# --- the console ------------------------------------------------------------------------


def console(username: str) -> Client:
    client = Client()
    client.force_login(user(username))
    return client


ADD = "/admin/audit/legalhold/add/"


def test_an_owner_sets_and_releases_a_hold_in_the_console(cast, subscribed) -> None:
    client = console("acme-owner")
    answer = client.post(ADD, {"org": cast.acme.pk, "scope": "org", "reason": "Case 12-A",
                               "session_id": ""})  # fmt: skip
    assert answer.status_code == HTTPStatus.FOUND, answer.content.decode()[:2000]
    hold = LegalHold.objects.get()
    assert (hold.scope, hold.reason, hold.set_by_name) == ("org", "Case 12-A", "acme-owner")
    [record] = trail(cast.acme, AuditKind.LEGAL_HOLD_SET)
    assert (record.via, record.actor) == ("console", "acme-owner")

    page = f"/admin/audit/legalhold/{hold.pk}/change/"
    assert client.get(page).status_code == HTTPStatus.OK
    answer = client.post(page, {"release_reason": "Case closed"})
    assert answer.status_code == HTTPStatus.FOUND
    hold.refresh_from_db()
    assert (hold.is_active, hold.release_reason, hold.released_by_name) == (
        False, "Case closed", "acme-owner",
    )  # fmt: skip
    assert trail(cast.acme, AuditKind.LEGAL_HOLD_RELEASED)[0].via == "console"
    assert [event.type for event in events(cast.acme)] == HOLD_EVENTS
    # Released: a record, shown and never changed again.
    again = client.post(page, {"release_reason": "again"})
    assert again.status_code in (HTTPStatus.FORBIDDEN, HTTPStatus.FOUND)
    assert len(trail(cast.acme, AuditKind.LEGAL_HOLD_RELEASED)) == 1


@pytest.mark.parametrize("role", REFUSED_ROLES, ids=str)
def test_other_roles_cannot_set_or_release_in_the_console(cast, role) -> None:
    hold = legal_hold_set(org=cast.acme, scope=HoldScope.ORG, reason="Case")
    client = console(f"acme-{role.value}")
    added = client.post(ADD, {"org": cast.acme.pk, "scope": "org", "reason": "mine"})
    assert added.status_code == HTTPStatus.FORBIDDEN
    changed = client.post(f"/admin/audit/legalhold/{hold.pk}/change/", {"release_reason": "x"})
    assert changed.status_code in (HTTPStatus.FORBIDDEN, HTTPStatus.FOUND)
    hold.refresh_from_db()
    assert hold.is_active
    assert LegalHold.objects.count() == 1
    listing = client.get("/admin/audit/legalhold/")
    # Auditors and managers see what is held; viewers do not.
    expected = HTTPStatus.FORBIDDEN if role == Role.VIEWER else HTTPStatus.OK
    assert listing.status_code == expected
