"""The console's fleet page of an org (issue 32): which agents (API keys, with the SDK's
user agent) enforce which policy version, which have not pulled since the last deploy, and
the suspensions still pending that were decided under a replaced policy. Reads only; the
records are written by the policy pull (``apps.policy.fleet``) and by the opening of an
approval (its ``policy_hash``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from apps.approvals.models import Approval
from apps.approvals.selectors import approvals_pending_decided_under_another_policy
from apps.policy.fleet import (
    Fleet,
    FleetAgent,
    FleetVersion,
    policy_fleet,
    policy_versions_by_hash,
)
from apps.tenancy.models import Org

SUSPENSIONS_SHOWN = 100


@dataclass(frozen=True)
class Suspension:
    approval: Approval
    decided_under: FleetVersion


@dataclass(frozen=True)
class AgentRow:
    agent: FleetAgent
    pulled_since_last_deploy: bool


@dataclass(frozen=True)
class FleetPage:
    fleet: Fleet
    suspensions: list[Suspension]
    stale_after_minutes: int

    @property
    def rows(self) -> list[AgentRow]:
        return [
            AgentRow(agent, self.fleet.pulled_since_last_deploy(agent))
            for agent in self.fleet.agents
        ]

    @property
    def counts(self) -> dict[str, int]:
        agents = self.fleet.agents
        return {
            "agents": len(agents),
            "current": sum(1 for agent in agents if agent.enforces_active),
            "stale": len(self.fleet.stale_agents),
            "not_pulled": len(self.fleet.not_pulled_since_last_deploy),
        }


def org_fleet_page(*, org: Org) -> FleetPage:
    fleet = policy_fleet(org=org)
    pending = approvals_pending_decided_under_another_policy(
        org=org, policy_hash=fleet.active.policy_hash, limit=SUSPENSIONS_SHOWN
    )
    names = policy_versions_by_hash(
        org=org, hashes={approval.policy_hash for approval in pending}, active=fleet.active
    )
    return FleetPage(
        fleet=fleet,
        suspensions=[Suspension(approval, names[approval.policy_hash]) for approval in pending],
        stale_after_minutes=max(1, round(settings.POLICY_STALE_AGENT_SECONDS / 60)),
    )
