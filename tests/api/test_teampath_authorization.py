"""The authorization matrix of every team-path route: Bearer API key only, scoped."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest

from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import DEFAULT_SCOPES, Scope
from apps.tenancy.services import api_key_issue, api_key_revoke
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TEAMPATH, TeamPathCaller, assert_error

pytestmark = TEAMPATH

ALLOW_SEARCH = (
    '[[rule]]\nid = "search.allow"\norder = 10\nenabled = true\nsubject = { kind = "any" }\n'
    'verb = "tool_call"\nscope = "*"\ndecision = "allow"\n'
)

# (method, path, body builder, scope the route needs, success status)
ROUTES = [
    ("GET", "/v1/teams/acme/policy", None, Scope.POLICY_READ, HTTPStatus.OK),
    (
        "POST",
        "/v1/receipts",
        lambda agent: as_text(agent.receipt()),
        Scope.RECEIPTS_WRITE,
        HTTPStatus.CREATED,
    ),
    (
        "POST",
        "/v1/receipts/batch",
        lambda agent: '{"receipts":[' + as_text(agent.receipt()) + "]}",
        Scope.RECEIPTS_WRITE,
        HTTPStatus.OK,
    ),
]
ROUTE_IDS = [f"{method} {path}" for method, path, *_ in ROUTES]


def call(caller: TeamPathCaller, method: str, path: str, body: Any, **headers: str) -> Any:
    if method == "GET":
        return caller.get(path, **headers)
    return caller.post(path, body(Agent()), **headers)


@pytest.fixture(autouse=True)
def _acme_policy(cast: Any) -> None:
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)


@pytest.mark.parametrize(("method", "path", "body", "scope", "ok"), ROUTES, ids=ROUTE_IDS)
class TestEveryRoute:
    def test_no_credential_is_401_unauthorized(self, anonymous, method, path, body, scope, ok):
        response = call(anonymous, method, path, body)
        assert_error(response, HTTPStatus.UNAUTHORIZED, "unauthorized")
        assert response["WWW-Authenticate"].startswith("Bearer")

    def test_an_x_api_key_header_alone_is_401(self, cast, method, path, body, scope, ok):
        caller = TeamPathCaller(None)
        response = call(caller, method, path, body, HTTP_X_API_KEY=cast.acme_key.secret)
        assert_error(response, HTTPStatus.UNAUTHORIZED, "unauthorized")

    def test_an_unknown_key_is_401(self, cast, method, path, body, scope, ok):
        caller = TeamPathCaller(cast.acme_key.secret[:-4] + "xxxx")
        assert_error(call(caller, method, path, body), HTTPStatus.UNAUTHORIZED, "unauthorized")

    def test_a_basic_credential_is_401(self, cast, method, path, body, scope, ok):
        caller = TeamPathCaller(None)
        response = call(caller, method, path, body, HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
        assert_error(response, HTTPStatus.UNAUTHORIZED, "unauthorized")

    def test_a_revoked_key_is_401(self, cast, acme, method, path, body, scope, ok):
        api_key_revoke(prefix=cast.acme_key.api_key.prefix)
        assert_error(call(acme, method, path, body), HTTPStatus.UNAUTHORIZED, "unauthorized")

    def test_a_key_without_the_scope_is_403(self, cast, method, path, body, scope, ok):
        others = [s for s in DEFAULT_SCOPES if s != scope]
        caller = TeamPathCaller(api_key_issue(org=cast.acme, scopes=others).secret)
        body_ = assert_error(call(caller, method, path, body), HTTPStatus.FORBIDDEN, "forbidden")
        assert scope.value in body_["message"]
        assert not MirrorEntry.objects.exists()

    def test_a_key_with_only_that_scope_succeeds(self, cast, method, path, body, scope, ok):
        caller = TeamPathCaller(api_key_issue(org=cast.acme, scopes=[scope]).secret)
        assert call(caller, method, path, body).status_code == ok


@pytest.mark.parametrize("team", ["globex", "nobody", "ACME"])
def test_another_or_unknown_team_is_the_same_404_team_not_found(acme, cast, team):
    policy_deploy(org=cast.globex, toml=ALLOW_SEARCH)
    assert_error(acme.get(f"/v1/teams/{team}/policy"), HTTPStatus.NOT_FOUND, "team_not_found")


def test_a_key_without_policy_read_gets_403_before_the_team_is_looked_at(cast):
    caller = TeamPathCaller(api_key_issue(org=cast.acme, scopes=[Scope.RECEIPTS_WRITE]).secret)
    assert_error(caller.get("/v1/teams/globex/policy"), HTTPStatus.FORBIDDEN, "forbidden")


def test_receipts_land_in_the_keys_own_org_only(acme, globex, cast, agent):
    assert acme.push(agent.receipt()).status_code == HTTPStatus.CREATED
    assert globex.batch([agent.receipt()]).status_code == HTTPStatus.OK
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 1
    assert MirrorEntry.objects.filter(org=cast.globex).count() == 1


def test_a_console_session_token_is_not_an_api_key(cast, dashboard):
    from django.contrib.auth import get_user_model

    from apps.tenancy.console_tokens import console_tokens_issue

    user = get_user_model().objects.get(username="acme-owner")
    caller = TeamPathCaller(console_tokens_issue(user=user, org_slug="acme").access)
    assert_error(caller.get("/v1/teams/acme/policy"), HTTPStatus.UNAUTHORIZED, "unauthorized")
