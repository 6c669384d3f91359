"""GET /v1/teams/{teamId}/policy: the PolicyBundle of policy.md §8."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

from apps.policy.rules import load_policy, render_policy_json
from apps.policy.selectors import EMPTY_POLICY_ID
from apps.policy.services import policy_deploy
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH

POLICY = """\
[[rule]]
id = "search.allow"
order = 20
enabled = true
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "allow"

[[rule]]
id = "payment.large.requires_approval"
order = 10
enabled = true
subject = { kind = "workflow", value = "ops/nightly" }
verb = "payment"
scope = "*"
decision = { require_approval = {} }
approvers = ["Security Admin"]
sla_minutes = 30
conditions = [{ field = "amount", op = "gt", value = 1000, display = "amount > $1,000" }]

[[rule]]
id = "old.rule"
order = 30
enabled = false
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "block"
"""

RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def test_it_serves_the_active_policy_as_a_bundle(acme, cast):
    version = policy_deploy(org=cast.acme, toml=POLICY).version
    response = acme.get("/v1/teams/acme/policy")
    assert response.status_code == HTTPStatus.OK
    bundle = response.json()
    assert set(bundle) == {"version", "rules", "fetchedAt"}
    assert bundle["version"] == version.policy_id
    assert bundle["rules"] == render_policy_json(load_policy(POLICY).policy)


def test_rules_are_camel_case_in_evaluation_order_disabled_ones_included(acme, cast):
    policy_deploy(org=cast.acme, toml=POLICY)
    rules = acme.get("/v1/teams/acme/policy").json()["rules"]
    assert [rule["id"] for rule in rules] == [
        "payment.large.requires_approval",
        "search.allow",
        "old.rule",
    ]
    assert rules[0] == {
        "id": "payment.large.requires_approval",
        "order": 10,
        "enabled": True,
        "subject": {"kind": "workflow", "value": "ops/nightly"},
        "verb": "payment",
        "scope": "*",
        "decision": "require_approval",
        "conditions": [
            {"field": "amount", "op": "gt", "value": 1000, "display": "amount > $1,000"}
        ],
        "approvers": ["Security Admin"],
        "slaMinutes": 30,
        "clientClearable": False,
    }
    assert rules[2]["enabled"] is False


def test_fetched_at_is_the_server_clock_in_rfc3339_utc(acme, cast):
    policy_deploy(org=cast.acme, toml=POLICY)
    fetched_at = acme.get("/v1/teams/acme/policy").json()["fetchedAt"]
    assert RFC3339_UTC.fullmatch(fetched_at)
    moment = datetime.strptime(fetched_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - moment) < timedelta(seconds=5)


def test_the_version_follows_each_deploy(acme, cast):
    first = policy_deploy(org=cast.acme, toml=POLICY).version
    assert acme.get("/v1/teams/acme/policy").json()["version"] == first.policy_id
    second = policy_deploy(org=cast.acme, toml=POLICY.replace("order = 30", "order = 40")).version
    assert second.policy_id != first.policy_id
    assert acme.get("/v1/teams/acme/policy").json()["version"] == second.policy_id


def test_a_team_that_never_deployed_a_policy_is_404_policy_not_found(acme, cast):
    assert_error(acme.get("/v1/teams/acme/policy"), HTTPStatus.NOT_FOUND, "policy_not_found")


def test_an_explicitly_deployed_empty_policy_is_served_with_no_rules(acme, cast):
    policy_deploy(org=cast.acme, toml="")
    bundle = acme.get("/v1/teams/acme/policy").json()
    assert bundle["version"] == EMPTY_POLICY_ID
    assert bundle["rules"] == []


def test_another_teams_policy_is_never_served(globex, cast):
    policy_deploy(org=cast.acme, toml=POLICY)
    assert_error(globex.get("/v1/teams/acme/policy"), HTTPStatus.NOT_FOUND, "team_not_found")
    assert_error(globex.get("/v1/teams/globex/policy"), HTTPStatus.NOT_FOUND, "policy_not_found")


def test_post_is_405_in_the_error_body(acme, cast):
    response = acme.post("/v1/teams/acme/policy", "{}")
    assert_error(response, HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed")
