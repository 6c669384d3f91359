"""Reads of deployed policy; every read takes the org explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from apps.policy.errors import PolicyReplayNotFound
from apps.policy.models import PolicyDeployment, PolicyHead, PolicyReplay, PolicyVersion
from apps.policy.replay import ReplayReport
from apps.policy.rules import EMPTY_POLICY_TOML, policy_hash, policy_id_for_hash
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


def policy_replay_get(*, org: Org, replay_id: str) -> PolicyReplay:
    """``org``'s replay ``replay_id`` (404 for another org's, never a leak)."""
    replay = PolicyReplay.objects.filter(org=org, replay_id=replay_id).first()
    if replay is None:
        raise PolicyReplayNotFound(f"no policy replay {replay_id!r} in this org")
    return replay


def policy_replay_report(replay: PolicyReplay) -> ReplayReport | None:
    """The replay's report, once it is ready."""
    return ReplayReport.from_dict(replay.report) if replay.report is not None else None
