"""Reads of deployed policy; every read takes the org explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from apps.policy.errors import PolicyNotFound, PolicyProposalNotFound, PolicyReplayNotFound
from apps.policy.models import (
    PolicyDeployment,
    PolicyHead,
    PolicyProposal,
    PolicyReplay,
    PolicyVersion,
    ProposalStatus,
)
from apps.policy.replay import ReplayReport
from apps.policy.rules import EMPTY_POLICY_TOML, policy_hash, policy_id_for_hash
from apps.policy.statement import policy_change_statement
from apps.tenancy.models import Org

EMPTY_POLICY_HASH = policy_hash(EMPTY_POLICY_TOML)
EMPTY_POLICY_ID = policy_id_for_hash(EMPTY_POLICY_HASH)


@dataclass(frozen=True)
class ActivePolicy:
    """What the SDK pins: the active text with its id and hash (server.md §7).

    ``version`` is None for the fail-safe pin of an org that never deployed a policy: the
    empty TOML, under which every action routes to a human (policy.md §6).
    """

    policy_id: str
    policy_hash: str
    toml: str
    activated_at: datetime | None
    version: PolicyVersion | None

    @property
    def is_fail_safe(self) -> bool:
        return self.version is None


FAIL_SAFE = ActivePolicy(
    policy_id=EMPTY_POLICY_ID,
    policy_hash=EMPTY_POLICY_HASH,
    toml=EMPTY_POLICY_TOML,
    activated_at=None,
    version=None,
)


def policy_active(*, org: Org) -> ActivePolicy:
    """The org's active pin, or the fail-safe pin; one query."""
    head = PolicyHead.objects.select_related("version").filter(org=org).first()
    if head is None or head.version is None:
        return FAIL_SAFE
    version = head.version
    return ActivePolicy(
        policy_id=version.policy_id,
        policy_hash=version.policy_hash,
        toml=version.toml,
        activated_at=head.activated_at,
        version=version,
    )


def policy_history(*, org: Org, limit: int = 50) -> list[PolicyDeployment]:
    """The org's deployments, newest first, with their versions and deployers."""
    return list(
        PolicyDeployment.objects.filter(org=org)
        .select_related("version", "previous_version", "deployed_by")
        .order_by("-deployed_at", "-id")[:limit]
    )


def proposal_statement(proposal: PolicyProposal) -> dict[str, Any]:
    """What an approver of ``proposal`` signs (``apps.policy.statement``)."""
    previous = proposal.previous_version
    return policy_change_statement(
        org_slug=proposal.org.slug,
        policy_hash=proposal.version.policy_hash,
        previous_policy_hash=previous.policy_hash if previous is not None else "",
        policy_id=proposal.version.policy_id,
    )


def _proposals(org: Org) -> QuerySet[PolicyProposal]:
    return PolicyProposal.objects.filter(org=org).select_related(
        "org", "version", "previous_version", "proposed_by"
    )


def policy_proposal_get(*, org: Org, policy_id: str) -> PolicyProposal:
    """The org's newest proposal of ``policy_id`` (a text proposed again after a rejection
    is a new proposal of the same id); another org's is 404."""
    proposal = (
        _proposals(org).filter(version__policy_id=policy_id).order_by("-created_at", "-id").first()
    )
    if proposal is None:
        raise PolicyProposalNotFound(f"no policy proposal {policy_id!r} for this org")
    return proposal


def policy_proposal_open(*, org: Org) -> PolicyProposal | None:
    return _proposals(org).filter(status=ProposalStatus.OPEN).first()


def policy_proposals(*, org: Org, limit: int = 20) -> list[PolicyProposal]:
    return list(_proposals(org).order_by("-created_at", "-id")[:limit])


def policy_break_glass_unapproved(*, org: Org) -> PolicyProposal | None:
    """The break-glass activation the dashboard warns of: the active version, activated
    without the quorum and not approved by it since (rejected afterwards included)."""
    head = PolicyHead.objects.filter(org=org).first()
    if head is None or head.version_id is None:
        return None
    return (
        _proposals(org)
        .filter(version_id=head.version_id, break_glass_at__isnull=False, ratified_at__isnull=True)
        .exclude(status=ProposalStatus.SUPERSEDED)
        .order_by("-break_glass_at")
        .first()
    )


def policy_approvals(*, org: Org, policy_hash: str) -> PolicyProposal:
    """The co-signed change that activated ``policy_hash`` (its newest), with its votes:
    what ``GET /v1/policy/approvals/{policy_hash}`` serves for offline verification."""
    proposal = (
        _proposals(org)
        .filter(version__policy_hash=policy_hash, deployment__isnull=False)
        .prefetch_related("votes")
        .order_by("-created_at", "-id")
        .first()
    )
    if proposal is None:
        raise PolicyNotFound(f"no co-signed activation of policy {policy_hash} for this org")
    return proposal


def policy_replay_get(*, org: Org, replay_id: str) -> PolicyReplay:
    """``org``'s replay ``replay_id`` (404 for another org's, never a leak)."""
    replay = PolicyReplay.objects.filter(org=org, replay_id=replay_id).first()
    if replay is None:
        raise PolicyReplayNotFound(f"no policy replay {replay_id!r} in this org")
    return replay


def policy_replay_report(replay: PolicyReplay) -> ReplayReport | None:
    """The replay's report, once it is ready."""
    return ReplayReport.from_dict(replay.report) if replay.report is not None else None
