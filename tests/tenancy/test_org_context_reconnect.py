"""A connection the database ended between two requests (a restart, ``idle_session_timeout``,
a proxy's idle timeout) is replaced, and the replacement carries the request's org context:
every SDK route answers as it would have on the old connection, on both profiles, with the
API key remembered by the worker (``key_cache``), so no key lookup sets the context anew.

Requests here start as under a real server (``close_old_connections``), run outside any
transaction of Django's, and default to no org at all, as a production worker does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pytest
from django.db import close_old_connections, connection
from rest_framework.test import APIClient

from apps.approvals.services import approver_key_register
from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from apps.tenancy.org_context import activate_all_orgs
from tests.approvals.conftest import Approver, suspended_receipt
from tests.common.test_prepared import cut_connection
from tests.policy.test_policy_api import ALLOW_SEARCH
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TeamPathCaller

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SCOPE = "payments.review"


@dataclass
class World:
    cast: Any
    agent: Agent
    approver: Approver
    suspended: dict[str, Any]


@pytest.fixture
def world(cast: Any) -> World:
    approver = Approver("alice")
    approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    agent = Agent()
    return World(cast=cast, agent=agent, approver=approver, suspended=suspended_receipt(agent))


@pytest.fixture
def production_worker(settings: Any) -> Iterator[None]:
    """Statements outside a request's own context see no org (a production worker's
    default): an org context lost on the way shows as a wrong answer, not a right one."""
    settings.ORG_CONTEXT_DEFAULT = "none"
    yield
    settings.ORG_CONTEXT_DEFAULT = "all"
    activate_all_orgs()


def served(call: Callable[[], Any]) -> Any:
    """One request as a server runs it: the persistent connection's check is due again."""
    close_old_connections()
    return call()


def after_the_database_ended_the_session(warm: Callable[[], Any], call: Callable[[], Any]) -> Any:
    """``warm`` authenticates (the worker now remembers the key); the server then ends the
    connection's session while it is idle; ``call`` is the next request."""
    assert served(warm).status_code == HTTPStatus.OK
    old = connection.connection
    cut_connection()
    response = served(call)
    assert connection.connection is not old
    return response


# --- key-scoped ---------------------------------------------------------------------------


def keyscoped_client(world: World) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=world.cast.acme_key.secret)
    return client


def _push(world: World, client: APIClient) -> None:
    response = client.generic(
        "POST", "/v1/receipts", '{"receipt":' + as_text(world.agent.receipt()) + "}",
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["seq"] == 2


def _open(world: World, client: APIClient) -> None:
    action_hash = world.suspended["content"]["action_hash"]
    response = client.post("/v1/approvals", {"action_hash": action_hash}, format="json")
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["status"] == "pending"


def _poll(world: World, client: APIClient) -> None:
    response = client.get(f"/v1/approvals/{world.suspended['content']['action_hash']}")
    assert response.status_code == HTTPStatus.OK, response.content
    assert response.json()["status"] == "pending"


def _submit_token(world: World, client: APIClient) -> None:
    content = world.suspended["content"]
    body = {"token_b64": world.approver.token(content, scope=SCOPE), "action_content": content}
    response = client.generic(
        "POST", f"/v1/approvals/{content['action_hash']}/submit-token", json.dumps(body),
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == HTTPStatus.OK, response.content
    assert response.json()["status"] == "approved"


def _pull(world: World, client: APIClient) -> None:
    response = client.get("/v1/policy/pull")
    assert response.status_code == HTTPStatus.OK, response.content
    assert response.json()["toml"] == ALLOW_SEARCH  # not the fail-safe empty policy


@pytest.mark.parametrize("route", [_push, _open, _poll, _submit_token, _pull])
def test_keyscoped_routes_answer_right_after_the_database_ended_the_session(
    world, production_worker, route
) -> None:
    client = keyscoped_client(world)
    first = client.generic(
        "POST", "/v1/receipts", '{"receipt":' + as_text(world.suspended) + "}",
        content_type="application/json",
    )  # fmt: skip
    assert first.status_code == HTTPStatus.CREATED  # opens its approval too
    after_the_database_ended_the_session(
        lambda: client.get("/v1/policy/pull"), lambda: route(world, client)
    )


# --- team-path ----------------------------------------------------------------------------


def _tp_push(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    response = acme.push(world.agent.receipt())
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["accepted"] is True


def _tp_batch(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    response = acme.batch([world.agent.receipt(), world.agent.receipt()])
    assert response.status_code == HTTPStatus.OK, response.content
    assert [result["accepted"] for result in response.json()] == [True, True]


def _tp_open(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    again = suspended_receipt(world.agent)
    response = acme.post("/v1/approvals", '{"receipt":' + as_text(again) + "}")
    assert response.status_code == HTTPStatus.CREATED, response.content


def _tp_reopen(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    response = acme.post("/v1/approvals", '{"receipt":' + as_text(world.suspended) + "}")
    assert response.status_code == HTTPStatus.OK, response.content
    assert response.json()["approvalId"] == opened["approvalId"]


def _tp_poll(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    response = acme.get(f"/v1/approvals/{opened['approvalId']}")
    assert response.status_code == HTTPStatus.OK, response.content
    assert response.json() == {"outcome": "pending"}


def _tp_token(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    token = world.approver.token(world.suspended["content"], scope=SCOPE)
    response = acme.post(
        f"/v1/approvals/{opened['approvalId']}/token", json.dumps({"token": token})
    )
    assert response.status_code == HTTPStatus.OK, response.content
    assert response.json()["outcome"] == "approved"


def _tp_policy(world: World, acme: TeamPathCaller, opened: dict[str, Any]) -> None:
    response = acme.get("/v1/teams/acme/policy")
    assert response.status_code == HTTPStatus.OK, response.content
    assert [rule["id"] for rule in response.json()["rules"]] == ["search.allow"]


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.usefixtures("teampath_profile")
@pytest.mark.parametrize(
    "route", [_tp_push, _tp_batch, _tp_open, _tp_reopen, _tp_poll, _tp_token, _tp_policy]
)
def test_teampath_routes_answer_right_after_the_database_ended_the_session(
    world, production_worker, route
) -> None:
    acme = TeamPathCaller(world.cast.acme_key.secret)
    first = acme.post("/v1/approvals", '{"receipt":' + as_text(world.suspended) + "}")
    assert first.status_code == HTTPStatus.CREATED, first.content
    after_the_database_ended_the_session(
        lambda: acme.get("/v1/teams/acme/policy"), lambda: route(world, acme, first.json())
    )


def test_the_org_context_follows_the_request_onto_every_new_connection(
    world, production_worker
) -> None:
    """Two cuts in a row, and writes after each: every entry lands in the key's org."""
    client = keyscoped_client(world)
    for _ in range(2):
        after_the_database_ended_the_session(
            lambda: client.get("/v1/policy/pull"),
            lambda: client.generic(
                "POST",
                "/v1/receipts",
                '{"receipt":' + as_text(world.agent.receipt()) + "}",
                content_type="application/json",
            ),
        )
    activate_all_orgs()
    assert MirrorEntry.objects.filter(org=world.cast.acme).count() == 2
