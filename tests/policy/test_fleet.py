"""The fleet (issue 32): every policy pull records which key was served which version; the
fleet view reads it; ``policy.stale_agents`` fires once per deploy when keys still enforce
a replaced version; a suspended receipt's approval keeps the policy it was decided under."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.approvals.models import Approval
from apps.events.models import Event as EventRow
from apps.events.services import webhook_endpoint_create
from apps.policy.fleet import policy_fleet, policy_pull_record, policy_stale_agents_notify
from apps.policy.models import PolicyDeployment, PolicyPull
from apps.policy.selectors import EMPTY_POLICY_HASH, EMPTY_POLICY_ID
from apps.policy.services import policy_deploy
from apps.policy.tasks import check_stale_agents
from apps.tenancy.models import ApiKey
from apps.tenancy.services import api_key_revoke
from tests.interop.corpus import CORPUS, KeyScopedRoute, flow_receipts
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SDK_AGENT = "heso/0.5.1 (python 3.11)"


class Clock:
    """``django.utils.timezone.now`` held at ``at`` (deploys, pulls and checks read it)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> datetime:
        self.at += timedelta(**delta)
        return self.at


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    frozen = Clock(T0)
    monkeypatch.setattr(timezone, "now", frozen)
    return frozen


def pull(secret: str, user_agent: str = SDK_AGENT) -> object:
    client = APIClient()
    return client.get("/v1/policy/pull", HTTP_X_API_KEY=secret, HTTP_USER_AGENT=user_agent)


def key_of(issued) -> ApiKey:
    return issued.api_key


# --- What a pull records -------------------------------------------------------------------


def test_pulls_by_two_keys_show_one_current_and_one_stale_agent(cast, clock) -> None:
    first = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    clock.advance(minutes=5)
    assert pull(cast.acme_key.secret).status_code == HTTPStatus.OK
    assert pull(cast.acme_policy_only_key.secret, "custom-agent/2").status_code == HTTPStatus.OK
    clock.advance(minutes=5)
    deploy_time = clock.at
    second = policy_deploy(org=cast.acme, toml=BLOCK_SEARCH).version
    clock.advance(minutes=2)
    assert pull(cast.acme_key.secret).status_code == HTTPStatus.OK

    current = PolicyPull.objects.get(api_key=key_of(cast.acme_key))
    stale = PolicyPull.objects.get(api_key=key_of(cast.acme_policy_only_key))
    assert (current.policy_hash, current.user_agent) == (second.policy_hash, SDK_AGENT)
    assert current.served_since == current.pulled_at == T0 + timedelta(minutes=12)
    assert (stale.policy_hash, stale.user_agent) == (first.policy_hash, "custom-agent/2")
    assert stale.served_since == stale.pulled_at == T0 + timedelta(minutes=5)
    assert not PolicyPull.objects.filter(org=cast.globex).exists()

    fleet = policy_fleet(org=cast.acme)
    assert fleet.active.policy_hash == second.policy_hash
    assert fleet.last_deployment is not None
    assert fleet.last_deployment.deployed_at == deploy_time
    by_prefix = {agent.api_key.prefix: agent for agent in fleet.agents}
    assert set(by_prefix) == {
        cast.acme_key.api_key.prefix,
        cast.acme_policy_only_key.api_key.prefix,
    }
    agent, lagging = (
        by_prefix[cast.acme_key.api_key.prefix],
        by_prefix[cast.acme_policy_only_key.api_key.prefix],
    )
    assert agent.enforces_active
    assert not agent.stale
    assert fleet.pulled_since_last_deploy(agent)
    assert agent.version is not None
    assert agent.version.policy_id == second.policy_id
    assert lagging.stale
    assert not fleet.pulled_since_last_deploy(lagging)
    assert lagging.version is not None
    assert (lagging.version.policy_id, lagging.version.deployed_at) == (first.policy_id, T0)
    assert [a.api_key.prefix for a in fleet.stale_agents] == [
        cast.acme_policy_only_key.api_key.prefix
    ]
    assert fleet.agents[0] is lagging  # the stale ones first


def test_a_key_that_never_pulled_is_listed_as_such_and_a_revoked_one_is_not(cast) -> None:
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    pull(cast.acme_key.secret)
    api_key_revoke(prefix=cast.acme_policy_only_key.api_key.prefix)

    fleet = policy_fleet(org=cast.acme)
    # acme's policy-only key is revoked and never pulled: not in its fleet.
    assert [agent.api_key.prefix for agent in fleet.agents] == [cast.acme_key.api_key.prefix]
    # Nor is a revoked key that did pull: it enforces nothing any more.
    pull(cast.acme_key.secret)
    api_key_revoke(prefix=cast.acme_key.api_key.prefix)
    assert policy_fleet(org=cast.acme).agents == []
    from apps.tenancy.services import api_key_issue

    fresh = api_key_issue(org=cast.acme, scopes=["policy:read"], label="new agent")
    pushing_only = api_key_issue(org=cast.acme, scopes=["receipts:write"], label="pusher")
    fleet = policy_fleet(org=cast.acme)
    never = {agent.api_key.prefix: agent for agent in fleet.agents}[fresh.api_key.prefix]
    assert never.pull is None
    assert not never.stale
    assert never in fleet.not_pulled_since_last_deploy
    assert pushing_only.api_key.prefix not in {agent.api_key.prefix for agent in fleet.agents}


def test_the_fail_safe_pin_is_recorded_under_its_own_name(cast) -> None:
    pull(cast.acme_key.secret)
    [agent] = [a for a in policy_fleet(org=cast.acme).agents if a.pull is not None]
    assert agent.pull.policy_hash == EMPTY_POLICY_HASH
    assert agent.version is not None
    assert (agent.version.policy_id, agent.version.is_active) == (EMPTY_POLICY_ID, True)
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    [agent] = [a for a in policy_fleet(org=cast.acme).agents if a.pull is not None]
    assert agent.stale
    assert agent.version.policy_id == EMPTY_POLICY_ID


def test_the_same_hash_within_a_minute_is_not_written_again(cast) -> None:
    version = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    key = key_of(cast.acme_key)

    def row() -> tuple[str, str, datetime, datetime]:
        stored = PolicyPull.objects.get(api_key=key)
        return stored.policy_hash, stored.user_agent, stored.served_since, stored.pulled_at

    assert policy_pull_record(api_key=key, policy_hash=version.policy_hash, user_agent="a", now=T0)
    later = T0 + timedelta(seconds=59)
    assert not policy_pull_record(
        api_key=key, policy_hash=version.policy_hash, user_agent="a", now=later
    )
    assert row() == (version.policy_hash, "a", T0, T0)

    # Another process (nothing remembered) sends the statement, which leaves the row alone.
    from apps.policy.fleet import policy_pull_memo_forget

    policy_pull_memo_forget()
    assert policy_pull_record(
        api_key=key, policy_hash=version.policy_hash, user_agent="a", now=later
    )
    assert row() == (version.policy_hash, "a", T0, T0)

    # A minute on, the pull time moves; the hash it enforces has been served since T0.
    minute = T0 + timedelta(seconds=61)
    assert policy_pull_record(
        api_key=key, policy_hash=version.policy_hash, user_agent="a", now=minute
    )
    assert row() == (version.policy_hash, "a", T0, minute)

    # A new user agent or a new hash is written at once.
    soon = minute + timedelta(seconds=1)
    assert policy_pull_record(
        api_key=key, policy_hash=version.policy_hash, user_agent="b", now=soon
    )
    assert row() == (version.policy_hash, "b", T0, soon)
    assert policy_pull_record(api_key=key, policy_hash="c" * 64, user_agent="b", now=soon)
    assert row() == ("c" * 64, "b", soon, soon)


def test_a_long_user_agent_is_kept_to_its_first_300_characters(cast) -> None:
    pull(cast.acme_key.secret, "x" * 5000)
    assert PolicyPull.objects.get(api_key=key_of(cast.acme_key)).user_agent == "x" * 300


# --- The pull's answer ---------------------------------------------------------------------

# The pull's whole answer for this policy, as it was before pulls were recorded.
UNICODE_POLICY = ALLOW_SEARCH + '# caf\u00e9 \u2014 "quoted"\n'
PULL_ANSWER = (
    b'{"status":"policy","policy_id":"pol_%s","policy_hash":"%s",'
    b'"toml":"[[rule]]\\nid = \\"search.allow\\"\\norder = 10\\nenabled = true\\n'
    b'subject = { kind = \\"any\\" }\\nverb = \\"tool_call\\"\\nscope = \\"*\\"\\n'
    b'decision = \\"allow\\"\\n# caf\xc3\xa9 \xe2\x80\x94 \\"quoted\\"\\n"}'
)


def test_the_pull_answers_byte_for_byte_what_it_answered_before(cast) -> None:
    version = policy_deploy(org=cast.acme, toml=UNICODE_POLICY).version
    expected = PULL_ANSWER % (version.policy_hash[:24].encode(), version.policy_hash.encode())
    assert version.policy_hash == "72f11f889fac55ae0c3ba96ab06b49f7220a59348b29eb7a65481948c51b4905"

    recorded = pull(cast.acme_key.secret)  # writes the key's row
    skipped = pull(cast.acme_key.secret)  # within the minute: no write
    assert PolicyPull.objects.filter(api_key=key_of(cast.acme_key)).count() == 1
    for response in (recorded, skipped):
        assert response.status_code == HTTPStatus.OK
        assert response.content == expected
        assert response["Content-Type"] == "application/json"
    assert sorted(recorded.headers) == sorted(skipped.headers)


# --- The team-path profile's pull -----------------------------------------------------------


@pytest.mark.urls("config.urls.teampath")  # the team-path profile (tests.teampath_fixtures)
@pytest.mark.usefixtures("teampath_profile")
def test_a_team_path_pull_is_recorded_too(acme, cast) -> None:
    version = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    response = acme.get("/v1/teams/acme/policy", HTTP_USER_AGENT="countersign-client/1")
    assert response.status_code == HTTPStatus.OK
    assert set(response.json()) == {"version", "rules", "fetchedAt"}
    stored = PolicyPull.objects.get(api_key=key_of(cast.acme_key))
    assert (stored.policy_hash, stored.user_agent) == (version.policy_hash, "countersign-client/1")


# --- policy.stale_agents ---------------------------------------------------------------------


@pytest.fixture
def subscribed(cast):
    return webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/hooks", event_types=["policy.stale_agents"]
    )


def stale_events(org) -> list[EventRow]:
    return list(EventRow.objects.filter(org=org, type="policy.stale_agents").order_by("id"))


def test_stale_agents_fire_once_per_deploy_after_the_configured_time(
    cast, clock, settings, subscribed
) -> None:
    settings.POLICY_STALE_AGENT_SECONDS = 600
    first = policy_deploy(org=cast.acme, toml=ALLOW_SEARCH).version
    pull(cast.acme_key.secret)
    pull(cast.acme_policy_only_key.secret, "custom-agent/2")
    clock.advance(minutes=30)
    deployed_at = clock.at
    second = policy_deploy(org=cast.acme, toml=BLOCK_SEARCH).version
    clock.advance(minutes=1)
    pull(cast.acme_key.secret)  # this one follows; the policy-only key does not

    clock.advance(seconds=500)  # 9:31 after the deploy: not yet
    assert policy_stale_agents_notify() == 0
    assert stale_events(cast.acme) == []

    clock.at = deployed_at + timedelta(seconds=600)  # its time has come
    assert policy_stale_agents_notify() == 1
    for _ in range(3):  # later runs (and the task itself) find it checked
        clock.advance(minutes=5)
        assert policy_stale_agents_notify() == 0
    assert check_stale_agents.call() == 0

    [event] = stale_events(cast.acme)
    assert event.payload == {
        "policy_id": second.policy_id,
        "policy_hash": second.policy_hash,
        "deployed_at": "2026-11-02T09:30:00Z",
        "stale_after_seconds": 600,
        "stale_count": 1,
        "agents": [
            {
                "api_key_prefix": cast.acme_policy_only_key.api_key.prefix,
                "api_key_label": "ro",
                "user_agent": "custom-agent/2",
                "policy_id": first.policy_id,
                "policy_hash": first.policy_hash,
                "pulled_at": "2026-11-02T09:00:00Z",
            }
        ],
    }
    # The first deploy was checked in the same run (its ten minutes were long up), but it
    # had been replaced: no event of its own, and it is not checked again.
    assert not PolicyDeployment.objects.filter(stale_agents_checked_at__isnull=True).exists()


def test_a_deploy_every_agent_follows_fires_nothing(cast, clock, settings, subscribed) -> None:
    settings.POLICY_STALE_AGENT_SECONDS = 60
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    pull(cast.acme_key.secret)
    clock.advance(minutes=1)
    policy_deploy(org=cast.acme, toml=BLOCK_SEARCH)
    pull(cast.acme_key.secret)
    clock.advance(minutes=2)
    assert policy_stale_agents_notify() == 0
    assert stale_events(cast.acme) == []
    assert not PolicyDeployment.objects.filter(stale_agents_checked_at__isnull=True).exists()


def test_a_deploy_replaced_before_its_time_defers_to_its_successor(
    cast, clock, settings, subscribed
) -> None:
    settings.POLICY_STALE_AGENT_SECONDS = 600
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    pull(cast.acme_key.secret)
    clock.advance(minutes=1)
    policy_deploy(org=cast.acme, toml=BLOCK_SEARCH)  # the key never pulls this one
    clock.advance(minutes=1)
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)  # back to what the key enforces
    clock.advance(minutes=20)
    assert policy_stale_agents_notify() == 0  # the active version is the key's own
    assert stale_events(cast.acme) == []


# --- The policy a suspension was decided under ---------------------------------------------


def test_a_suspended_receipt_keeps_the_policy_hash_it_was_decided_under(cast) -> None:
    [suspended] = [p for p in flow_receipts("gated_approved") if p.kind == "suspended"]
    signed = suspended.receipt["content"]["suspension"]["policy"]["policy_hash"]
    assert signed == CORPUS["policy_hash"]
    KeyScopedRoute(cast.acme_key.secret).push([suspended.receipt])

    approval = Approval.objects.get(org=cast.acme, action_hash=suspended.action_hash)
    assert approval.policy_hash == signed


def test_a_receipt_without_a_suspension_block_leaves_it_empty(cast) -> None:
    from apps.approvals.services import approval_open
    from tests.approvals.conftest import suspended_receipt
    from tests.receipts.factories import Agent

    content = suspended_receipt(Agent())["content"]
    opened = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content
    )
    assert opened.approval.policy_hash == ""
