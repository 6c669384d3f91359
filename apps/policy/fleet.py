"""The fleet: which agent (API key) enforces which policy version.

Every policy pull records, per key, the hash it was served (``policy_pull_record``); the
console's fleet view reads them (``policy_fleet``), and a periodic check
(``policy_stale_agents_notify``) emits ``policy.stale_agents`` once per deployment when
keys still enforce a replaced version ``POLICY_STALE_AGENT_SECONDS`` after it.

The pull is on a hot read path, so its record costs at most one statement, and usually
none: a key served the same hash with the same ``User-Agent`` less than a minute ago is
not written again. Each process remembers what it recorded last per key (``_recorded``);
the upsert itself also leaves such a row alone (its ``WHERE``), so several workers serving
one key do not each rewrite it. ``pulled_at`` is therefore the last pull to the minute;
``served_since`` is when the key was first served the hash it has now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from apps.common import outbound
from apps.common.timestamps import utc_text
from apps.policy.models import PolicyDeployment, PolicyPull, PolicyVersion
from apps.policy.selectors import (
    EMPTY_POLICY_HASH,
    EMPTY_POLICY_ID,
    ActivePolicy,
    policy_active,
)
from apps.tenancy.models import ApiKey, Org, Scope

PULL_RESOLUTION = timedelta(minutes=1)
USER_AGENT_MAX_CHARS = 300
# The most keys a ``policy.stale_agents`` event lists (its ``stale_count`` counts them all).
EVENT_AGENTS_MAX = 100
# The most deployments one run of the check looks at (the rest wait for the next run).
CHECK_BATCH = 500
# The most keys the fleet page lists.
FLEET_MAX_KEYS = 1000

# (key id, key digest) -> (hash, user agent, when recorded). The digest makes an entry
# name one key for ever: a key id reused by a new key (a reset test database) is another.
_recorded: dict[tuple[int, str], tuple[str, str, datetime]] = {}
_RECORDED_MAX = 10_000

_TABLE = PolicyPull._meta.db_table
# One statement: insert the key's row, or update it unless it already says the same thing
# and was written less than PULL_RESOLUTION ago. ``served_since`` moves only with the hash.
_UPSERT = (
    f"INSERT INTO {_TABLE} (api_key_id, org_id, user_agent, policy_hash, served_since, pulled_at) "  # noqa: S608 (a model's table)
    "VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (api_key_id) DO UPDATE SET "
    "user_agent = EXCLUDED.user_agent, policy_hash = EXCLUDED.policy_hash, "
    f"served_since = CASE WHEN {_TABLE}.policy_hash = EXCLUDED.policy_hash "
    f"THEN {_TABLE}.served_since ELSE EXCLUDED.served_since END, "
    "pulled_at = EXCLUDED.pulled_at "
    f"WHERE {_TABLE}.policy_hash <> EXCLUDED.policy_hash "
    f"OR {_TABLE}.user_agent <> EXCLUDED.user_agent OR {_TABLE}.pulled_at <= %s"
)
# On PostgreSQL the same statement also answers when the row was last written: the upsert's
# own row when it wrote, else the row as it stood (the statement's snapshot), so a process
# that another one beat to the write remembers that write's time, not its own.
_UPSERT_RETURNING = (
    f"WITH written AS ({_UPSERT} RETURNING pulled_at) "  # noqa: S608 (a model's table)
    "SELECT pulled_at FROM written UNION ALL "
    f"SELECT pulled_at FROM {_TABLE} WHERE api_key_id = %s AND NOT EXISTS (SELECT FROM written)"
)


def policy_pull_record(
    *, api_key: ApiKey, policy_hash: str, user_agent: str, now: datetime | None = None
) -> bool:
    """Record that ``api_key`` was just served ``policy_hash``; whether a statement ran.

    Skipped (no round trip) when this process knows the key's row already says the same
    hash and user agent and was written less than a minute ago. Never changes what the pull
    answers.
    """
    now = now or timezone.now()
    user_agent = user_agent[:USER_AGENT_MAX_CHARS]
    memo_key = (api_key.pk, api_key.digest)
    known = _recorded.get(memo_key)
    if known is not None:
        known_hash, known_agent, at = known
        if known_hash == policy_hash and known_agent == user_agent and now - at < PULL_RESOLUTION:
            return False
    values: list[Any] = [api_key.pk, api_key.org_id, user_agent, policy_hash, now, now,
                         now - PULL_RESOLUTION]  # fmt: skip
    written_at = now
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(_UPSERT_RETURNING, [*values, api_key.pk])
            row = cursor.fetchone()
            written_at = row[0] if row is not None else now
        else:
            cursor.execute(_UPSERT, values)
    if len(_recorded) >= _RECORDED_MAX:
        _recorded.clear()
    _recorded[memo_key] = (policy_hash, user_agent, written_at)
    return True


def policy_pull_memo_forget() -> None:
    """Forget what this process recorded (tests; the next pull of each key writes)."""
    _recorded.clear()


# --- The fleet view ----------------------------------------------------------------------


@dataclass(frozen=True)
class FleetVersion:
    """A policy version as the fleet view names it; ``policy_id`` "" when this service
    never deployed that hash (the fail-safe pin is named as such)."""

    policy_hash: str
    policy_id: str
    deployed_at: datetime | None  # its latest activation
    is_active: bool


@dataclass(frozen=True)
class FleetAgent:
    api_key: ApiKey
    pull: PolicyPull | None  # None: the key never pulled
    version: FleetVersion | None

    @property
    def enforces_active(self) -> bool:
        return self.version is not None and self.version.is_active

    @property
    def stale(self) -> bool:
        """It pulled, and what it was served has been replaced since."""
        return self.pull is not None and not self.enforces_active


@dataclass(frozen=True)
class Fleet:
    active: ActivePolicy
    last_deployment: PolicyDeployment | None
    agents: list[FleetAgent]

    def pulled_since_last_deploy(self, agent: FleetAgent) -> bool:
        if agent.pull is None:
            return False
        if self.last_deployment is None:
            return True
        return agent.pull.pulled_at >= self.last_deployment.deployed_at

    @property
    def stale_agents(self) -> list[FleetAgent]:
        return [agent for agent in self.agents if agent.stale]

    @property
    def not_pulled_since_last_deploy(self) -> list[FleetAgent]:
        return [agent for agent in self.agents if not self.pulled_since_last_deploy(agent)]


def policy_versions_by_hash(
    *, org: Org, hashes: set[str], active: ActivePolicy
) -> dict[str, FleetVersion]:
    """How the fleet names each of ``hashes``: its version id and latest activation."""
    named: dict[str, FleetVersion] = {}
    by_pk = {
        version.pk: version
        for version in PolicyVersion.objects.filter(org=org, policy_hash__in=hashes)
    }
    last_deployed = dict(
        PolicyDeployment.objects.filter(org=org, version_id__in=list(by_pk))
        .values("version_id")
        .annotate(at=Max("deployed_at"))
        .values_list("version_id", "at")
    )
    for pk, version in by_pk.items():
        named[version.policy_hash] = FleetVersion(
            policy_hash=version.policy_hash,
            policy_id=version.policy_id,
            deployed_at=last_deployed.get(pk),
            is_active=version.policy_hash == active.policy_hash,
        )
    # Not a deployed version: the fail-safe pin of an org that had none yet.
    for policy_hash in hashes - named.keys():
        named[policy_hash] = FleetVersion(
            policy_hash=policy_hash,
            policy_id=EMPTY_POLICY_ID if policy_hash == EMPTY_POLICY_HASH else "",
            deployed_at=None,
            is_active=policy_hash == active.policy_hash,
        )
    return named


def policy_fleet(*, org: Org) -> Fleet:
    """The org's active keys that pulled a policy, or may (with ``policy:read``), each with
    the version it was last served; stale ones first, then by last pull, newest first. A
    revoked key enforces nothing any more: it is left out, as from ``policy.stale_agents``."""
    active = policy_active(org=org)
    last_deployment = (
        PolicyDeployment.objects.filter(org=org).order_by("-deployed_at", "-id").first()
    )
    pulls = {
        pull.api_key_id: pull
        for pull in PolicyPull.objects.filter(org=org, api_key__revoked_at__isnull=True)
        .select_related("api_key")
        .order_by("pulled_at")[:FLEET_MAX_KEYS]
    }
    keys = {pull.api_key_id: pull.api_key for pull in pulls.values()}
    for key in ApiKey.objects.filter(org=org, revoked_at__isnull=True)[:FLEET_MAX_KEYS]:
        if key.has_scope(Scope.POLICY_READ):
            keys.setdefault(key.pk, key)
    versions = policy_versions_by_hash(
        org=org, hashes={pull.policy_hash for pull in pulls.values()}, active=active
    )
    agents = [
        FleetAgent(
            api_key=key,
            pull=pulls.get(pk),
            version=versions[pulls[pk].policy_hash] if pk in pulls else None,
        )
        for pk, key in keys.items()
    ]
    agents.sort(key=_fleet_order)
    return Fleet(active=active, last_deployment=last_deployment, agents=agents)


def _fleet_order(agent: FleetAgent) -> tuple[int, float, str]:
    rank = 0 if agent.stale else (2 if agent.pull is None else 1)
    pulled = -agent.pull.pulled_at.timestamp() if agent.pull else 0.0
    return rank, pulled, agent.api_key.prefix


def policy_stale_pulls(*, org: Org, active_hash: str) -> list[PolicyPull]:
    """The org's active keys whose last pull served another hash than ``active_hash``,
    the longest stale first."""
    return list(
        PolicyPull.objects.filter(org=org, api_key__revoked_at__isnull=True)
        .exclude(policy_hash=active_hash)
        .select_related("api_key")
        .order_by("pulled_at", "api_key_id")
    )


# --- policy.stale_agents -----------------------------------------------------------------


def policy_stale_agents_notify(*, now: datetime | None = None) -> int:
    """Check every deployment that is ``POLICY_STALE_AGENT_SECONDS`` old and not checked
    yet; for each one still active whose org has keys enforcing a replaced version, emit
    ``policy.stale_agents``. Each deployment is checked once (marked in the transaction
    of its event), so the event fires at most once per deployment whatever the number of
    runs or workers. A deployment replaced before its time was up is marked without an
    event: its successor's check speaks for the org. The number of events emitted."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.POLICY_STALE_AGENT_SECONDS)
    due = list(
        PolicyDeployment.objects.filter(
            stale_agents_checked_at__isnull=True, deployed_at__lte=cutoff
        )
        .order_by("deployed_at")
        .values_list("pk", flat=True)[:CHECK_BATCH]
    )
    emitted = 0
    for pk in due:
        with transaction.atomic():
            deployment = (
                PolicyDeployment.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(pk=pk, stale_agents_checked_at__isnull=True)
                .select_related("org", "version")
                .first()
            )
            if deployment is None:
                continue  # another run has it
            deployment.stale_agents_checked_at = now
            deployment.save(update_fields=["stale_agents_checked_at"])
            latest = (
                PolicyDeployment.objects.filter(org_id=deployment.org_id)
                .order_by("-deployed_at", "-id")
                .values_list("pk", flat=True)
                .first()
            )
            if latest != deployment.pk:
                continue
            stale = policy_stale_pulls(
                org=deployment.org, active_hash=deployment.version.policy_hash
            )
            if stale:
                _emit_stale_agents(deployment, stale)
                emitted += 1
    return emitted


def _emit_stale_agents(deployment: PolicyDeployment, stale: list[PolicyPull]) -> None:
    org = deployment.org
    version = deployment.version

    def payload() -> dict[str, Any]:
        names = policy_versions_by_hash(
            org=org,
            hashes={pull.policy_hash for pull in stale[:EVENT_AGENTS_MAX]},
            active=policy_active(org=org),
        )
        return {
            "policy_id": version.policy_id,
            "policy_hash": version.policy_hash,
            "deployed_at": utc_text(deployment.deployed_at),
            "stale_after_seconds": settings.POLICY_STALE_AGENT_SECONDS,
            "stale_count": len(stale),
            "agents": [
                {
                    "api_key_prefix": pull.api_key.prefix,
                    "api_key_label": pull.api_key.label,
                    "user_agent": pull.user_agent,
                    "policy_id": names[pull.policy_hash].policy_id or None,
                    "policy_hash": pull.policy_hash,
                    "pulled_at": utc_text(pull.pulled_at),
                }
                for pull in stale[:EVENT_AGENTS_MAX]
            ],
        }

    outbound.emit(org_id=org.pk, event_type="policy.stale_agents", payload=payload)
