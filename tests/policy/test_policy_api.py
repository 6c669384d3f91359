"""Policy pull (SDK plane), deploy and preview (dashboard plane)."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from apps.policy.models import PolicyDeployment, PolicyHead, PolicyVersion
from apps.policy.rules import policy_hash
from apps.policy.selectors import EMPTY_POLICY_HASH, EMPTY_POLICY_ID, policy_active
from apps.policy.services import policy_deploy


def rule_toml(rule_id: str, verb: str, decision: str, extra: str = "") -> str:
    return (
        f'[[rule]]\nid = "{rule_id}"\norder = 10\nenabled = true\nsubject = {{ kind = "any" }}\n'
        f'verb = "{verb}"\nscope = "*"\ndecision = "{decision}"\n{extra}'
    )


ALLOW_SEARCH = rule_toml("search.allow", "tool_call", "allow")

BLOCK_SEARCH = rule_toml("search.block", "tool_call", "block")

FLOOR_BYPASS = rule_toml("pay.allow", "payment", "allow")


def sdk(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=secret)
    return client


# --- GET /v1/policy/pull ------------------------------------------------------------------


def test_an_org_without_a_policy_pulls_the_fail_safe_empty_pin(cast) -> None:
    response = sdk(cast.acme_key.secret).get("/v1/policy/pull")
    assert response.status_code == HTTPStatus.OK
    assert response.json() == {
        "status": "policy",
        "policy_id": EMPTY_POLICY_ID,
        "policy_hash": EMPTY_POLICY_HASH,
        "toml": "",
    }
    assert "pol_" + policy_hash("")[:24] == EMPTY_POLICY_ID


def test_pull_returns_the_active_toml_with_its_id_and_hash(cast) -> None:
    version = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    body = sdk(cast.acme_policy_only_key.secret).get("/v1/policy/pull").json()
    assert body == {
        "status": "policy",
        "policy_id": version.policy_id,
        "policy_hash": policy_hash(ALLOW_SEARCH),
        "toml": ALLOW_SEARCH,
    }
    # Another org's pull is unaffected.
    assert sdk(cast.globex_key.secret).get("/v1/policy/pull").json()["toml"] == ""


def test_pull_authorization(cast, dashboard) -> None:
    assert APIClient().get("/v1/policy/pull").status_code == HTTPStatus.UNAUTHORIZED
    assert sdk("hk_000000000000_nope").get("/v1/policy/pull").status_code == 401
    assert dashboard("owner").get("/v1/policy/pull").status_code == HTTPStatus.UNAUTHORIZED
    from apps.tenancy.services import api_key_issue

    no_policy_scope = api_key_issue(org=cast.acme, scopes=["receipts:write"])
    response = sdk(no_policy_scope.secret).get("/v1/policy/pull")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "policy:read" in response.json()["detail"]


# --- POST /v1/policy ------------------------------------------------------------------------


def test_a_manager_deploys_a_policy_and_the_sdk_pulls_it(cast, dashboard) -> None:
    response = dashboard("manager").post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json")
    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert body["status"] == "policy"
    assert body["policy_hash"] == policy_hash(ALLOW_SEARCH)
    assert body["policy_id"] == "pol_" + body["policy_hash"][:24]
    assert body["toml"] == ALLOW_SEARCH
    assert sdk(cast.acme_key.secret).get("/v1/policy/pull").json() == body
    deployment = PolicyDeployment.objects.get(org=cast.acme)
    assert deployment.deployed_by.username == "acme-manager"
    assert deployment.previous_version is None
    assert deployment.channel == "api"


@pytest.mark.parametrize("role", ["viewer", "auditor"])
def test_roles_below_manager_cannot_deploy(cast, dashboard, role) -> None:
    response = dashboard(role).post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert PolicyVersion.objects.count() == 0


def test_deploy_authorization_refuses_api_keys_and_anonymous(cast) -> None:
    assert APIClient().post("/v1/policy", {"toml": ""}, format="json").status_code == 401
    response = sdk(cast.acme_key.secret).post("/v1/policy", {"toml": ""}, format="json")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    bearer_key = APIClient()
    bearer_key.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.acme_key.secret}")
    assert bearer_key.post("/v1/policy", {"toml": ""}, format="json").status_code == 401


def test_a_toml_that_does_not_parse_is_422_and_nothing_is_written(cast, dashboard) -> None:
    response = dashboard("owner").post("/v1/policy", {"toml": "[[rules]\nid = "}, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json()["detail"].startswith("policy does not parse")
    assert PolicyVersion.objects.count() == 0
    assert PolicyHead.objects.count() == 0


def test_a_floor_bypass_is_409_naming_the_rule(cast, dashboard) -> None:
    response = dashboard("manager").post("/v1/policy", {"toml": FLOOR_BYPASS}, format="json")
    assert response.status_code == HTTPStatus.CONFLICT
    body = response.json()
    assert "pay.allow" in body["detail"]
    assert body["rule_id"] == "pay.allow"
    assert PolicyVersion.objects.count() == 0


@pytest.mark.parametrize(
    "body",
    [{}, {"toml": 7}, {"toml": None}, {"toml": "", "expected_policy_hash": "xyz"}],
)
def test_bad_deploy_bodies_are_422(cast, dashboard, body) -> None:
    response = dashboard("manager").post("/v1/policy", body, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert "detail" in response.json()


def test_a_non_json_deploy_body_is_422(cast, dashboard) -> None:
    response = dashboard("manager").generic(
        "POST", "/v1/policy", "{not json", content_type="application/json"
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_the_toml_is_never_trimmed_only_its_line_endings_normalised(cast, dashboard) -> None:
    spaced = "\n\n" + ALLOW_SEARCH.replace("\n", "\r\n") + "   \r\n"
    body = dashboard("manager").post("/v1/policy", {"toml": spaced}, format="json").json()
    deployed = "\n\n" + ALLOW_SEARCH + "   \n"
    assert body["toml"] == deployed
    assert body["policy_hash"] == policy_hash(deployed)


def test_expected_policy_hash_must_equal_the_active_pin(cast, dashboard) -> None:
    client = dashboard("manager")
    first = client.post(
        "/v1/policy",
        {"toml": ALLOW_SEARCH, "expected_policy_hash": EMPTY_POLICY_HASH},
        format="json",
    )
    assert first.status_code == HTTPStatus.OK
    stale = client.post(
        "/v1/policy",
        {"toml": BLOCK_SEARCH, "expected_policy_hash": EMPTY_POLICY_HASH},
        format="json",
    )
    assert stale.status_code == HTTPStatus.CONFLICT
    assert stale.json()["active_policy_hash"] == policy_hash(ALLOW_SEARCH)
    assert policy_active(org=cast.acme).toml == ALLOW_SEARCH
    fresh = client.post(
        "/v1/policy",
        {"toml": BLOCK_SEARCH, "expected_policy_hash": policy_hash(ALLOW_SEARCH)},
        format="json",
    )
    assert fresh.status_code == HTTPStatus.OK


def test_deploying_the_same_toml_is_idempotent(cast, dashboard) -> None:
    client = dashboard("manager")
    first = client.post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json").json()
    again = client.post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json").json()
    assert first == again
    assert PolicyVersion.objects.count() == 1
    assert PolicyDeployment.objects.count() == 1


def test_redeploying_an_older_toml_reactivates_it_under_its_old_id(cast, dashboard) -> None:
    client = dashboard("manager")
    old = client.post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json").json()
    client.post("/v1/policy", {"toml": BLOCK_SEARCH}, format="json")
    back = client.post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json").json()
    assert back["policy_id"] == old["policy_id"]
    assert PolicyVersion.objects.filter(org=cast.acme).count() == 2
    history = list(
        PolicyDeployment.objects.filter(org=cast.acme)
        .order_by("deployed_at", "id")
        .values_list("version__toml", "previous_version__toml")
    )
    assert history == [
        (ALLOW_SEARCH, None),
        (BLOCK_SEARCH, ALLOW_SEARCH),
        (ALLOW_SEARCH, BLOCK_SEARCH),
    ]


def test_the_empty_toml_can_be_deployed_explicitly(cast, dashboard) -> None:
    client = dashboard("manager")
    client.post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json")
    body = client.post("/v1/policy", {"toml": ""}, format="json").json()
    assert (body["policy_id"], body["toml"]) == (EMPTY_POLICY_ID, "")
    assert sdk(cast.acme_key.secret).get("/v1/policy/pull").json()["toml"] == ""


def test_a_deploy_in_one_org_never_touches_another(cast, dashboard) -> None:
    dashboard("manager").post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json")
    assert policy_active(org=cast.globex).is_fail_safe
