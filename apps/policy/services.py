"""The one write path for policy: ``policy_deploy`` (API, console and command alike), and
the replay of a proposed policy (``policy_replay_request``), stored for whoever asked."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from apps.common import outbound
from apps.common.errors import InvalidInput
from apps.common.tasks import enqueue
from apps.common.timestamps import utc_text
from apps.policy.errors import PolicyFloorBypass, PolicyParseRejected, PolicyPinMismatch
from apps.policy.models import (
    DeployChannel,
    PolicyDeployment,
    PolicyHead,
    PolicyReplay,
    PolicyVersion,
    ReplayStatus,
)
from apps.policy.replay import policy_replay_compute, window_receipts
from apps.policy.rules import (
    EMPTY_POLICY_TOML,
    Policy,
    load_policy,
    policy_hash,
    policy_id_for_hash,
)
from apps.policy.selectors import EMPTY_POLICY_HASH, policy_active
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org


def policy_text_normalize(toml: str) -> str:
    """The text a policy is validated, hashed, stored and served as: every line ending LF.

    Every way a policy enters (the console's form, ``POST /v1/policy``, ``deploy_policy``,
    the previews, ``check_policy``) passes through here, so one text has one hash whatever
    sent it: a browser's form sends its lines CRLF-terminated, a file from Windows may have
    them, and the same policy deployed from the console and from the file must stay one
    version. A lone CR (an old Mac line end) is a line end too. Nothing else is touched: a
    byte-order mark, blanks and trailing blank lines still change the hash (policy.md §7).
    """
    return toml.replace("\r\n", "\n").replace("\r", "\n")


def policy_validate(*, toml: str) -> Policy:
    """Parse and floor-check ``toml`` (line endings normalised, as it would be deployed);
    raise the deploy refusal on failure."""
    loaded = load_policy(policy_text_normalize(toml))
    if loaded.result == "parse_error":
        raise PolicyParseRejected(f"policy does not parse: {loaded.detail}")
    if loaded.result == "floor_bypass":
        raise PolicyFloorBypass(f"dangerous-lane floor: {loaded.detail}", rule_id=loaded.rule_id)
    assert loaded.policy is not None
    return loaded.policy


def policy_deploy(
    *,
    org: Org,
    toml: str,
    expected_policy_hash: str | None = None,
    actor: Actor = OPERATOR,
) -> PolicyVersion:
    """Validate, then activate ``toml`` (line endings normalised: ``policy_text_normalize``)
    for ``org``; return the (possibly existing) version.

    Validation happens before any write. The org's ``PolicyHead`` row is locked for the
    pin comparison and the switch, so of concurrent deploys expecting the same hash exactly
    one wins and the others get ``PolicyPinMismatch``. Deploying the active text again is a
    no-op that returns the active version (no history row); deploying an older text
    re-activates its version under its old id and records the deployment (its channel is
    how the actor acts: console, API or command) and the org's audit event.
    """
    toml = policy_text_normalize(toml)
    policy = policy_validate(toml=toml)
    new_hash = policy_hash(toml)
    with transaction.atomic():
        PolicyHead.objects.bulk_create([PolicyHead(org=org)], ignore_conflicts=True)
        head = PolicyHead.objects.select_for_update().get(org=org)
        active_version = PolicyVersion.objects.get(pk=head.version_id) if head.version_id else None
        active_hash = active_version.policy_hash if active_version else EMPTY_POLICY_HASH
        if expected_policy_hash is not None and expected_policy_hash != active_hash:
            raise PolicyPinMismatch(
                "expected_policy_hash is not the active pin: the policy changed since you read it",
                active_policy_hash=active_hash,
            )
        if active_version is not None and active_version.policy_hash == new_hash:
            return active_version
        version, _ = PolicyVersion.objects.get_or_create(
            org=org,
            policy_hash=new_hash,
            defaults={
                "policy_id": policy_id_for_hash(new_hash),
                "toml": toml,
                "rule_count": len(policy.rules),
            },
        )
        now = timezone.now()
        head.version = version
        head.activated_at = now
        head.save(update_fields=["version", "activated_at"])
        PolicyDeployment.objects.create(
            org=org,
            version=version,
            previous_version=active_version,
            deployed_by=actor.user if isinstance(actor.user, User) else None,
            channel=DeployChannel(actor.via),
            deployed_at=now,
        )
        org_audit_record(
            org=org, kind=AuditKind.POLICY_DEPLOYED, actor=actor,
            summary=f"policy {version.policy_id} deployed ({version.rule_count} rules)",
            detail={"policy_id": version.policy_id, "policy_hash": new_hash,
                    "previous_policy_hash": active_hash},
        )  # fmt: skip
        outbound.emit(
            org_id=org.pk,
            event_type="policy.deployed",
            payload=lambda: {
                "policy_id": version.policy_id,
                "policy_hash": version.policy_hash,
                "previous_policy_hash": active_hash,
                "rule_count": version.rule_count,
                "channel": actor.via,
                "deployed_by": actor.name or None,
                "deployed_at": utc_text(now),
            },
        )
    return version


# -- replay ---------------------------------------------------------------------------------

REPLAY_ID_PREFIX = "rpl_"


def policy_replay_request(
    *, org: Org, toml: str, days: int, requested_by: User | None = None
) -> PolicyReplay:
    """Replay ``toml`` (validated as a deploy would: a refusal raises the deploy's error)
    over ``org``'s verified receipts of the last ``days`` days against the active policy,
    and store the report: the one entry for the console's preview, the dashboard API's and
    a policy proposal's replay.

    A window the analytics rollups count at most ``POLICY_REPLAY_INLINE_RECEIPTS``
    receipts in is replayed now and the row comes back ready; a larger one is queued (the
    row comes back pending, a worker runs :func:`policy_replay_run`, the caller polls)."""
    if not 1 <= days <= settings.POLICY_PREVIEW_MAX_DAYS:
        raise InvalidInput(
            f"days must be between 1 and {settings.POLICY_PREVIEW_MAX_DAYS}, not {days}"
        )
    toml = policy_text_normalize(toml)
    policy_validate(toml=toml)
    active = policy_active(org=org)
    end = timezone.now()
    start = end - timedelta(days=days)
    estimated = window_receipts(org=org, start=start)
    replay = PolicyReplay.objects.create(
        org=org,
        replay_id=REPLAY_ID_PREFIX + secrets.token_urlsafe(18),
        proposed_toml=toml,
        proposed_policy_hash=policy_hash(toml),
        current_version=active.version,
        current_policy_hash=active.policy_hash,
        days=days,
        window_start=start,
        window_end=end,
        estimated_receipts=estimated,
        requested_by=requested_by if requested_by and requested_by.pk else None,
    )
    if estimated > settings.POLICY_REPLAY_INLINE_RECEIPTS:
        from apps.policy.tasks import run_policy_replay  # the task module imports this one

        enqueue(run_policy_replay, replay.pk)
        return replay
    return policy_replay_run(replay_pk=replay.pk)


def policy_replay_run(*, replay_pk: int) -> PolicyReplay:
    """Replay a stored request and store its report (ready), or its failure (failed).

    Run again from the start after an interrupted worker (the report is only written at
    the end), so a reclaimed task finishes the replay its first run began."""
    claimed = PolicyReplay.objects.filter(
        pk=replay_pk, status__in=(ReplayStatus.PENDING, ReplayStatus.RUNNING)
    ).update(status=ReplayStatus.RUNNING)
    replay = PolicyReplay.objects.select_related("org", "current_version").get(pk=replay_pk)
    if not claimed:
        return replay
    try:
        current_toml = replay.current_version.toml if replay.current_version else ""
        report = policy_replay_compute(
            org=replay.org,
            proposed=policy_validate(toml=replay.proposed_toml),
            current=_enforced(current_toml),
            start=replay.window_start,
            end=replay.window_end,
            limit=settings.POLICY_PREVIEW_MAX_RECEIPTS,
        )
    except Exception as error:
        PolicyReplay.objects.filter(pk=replay_pk).update(
            status=ReplayStatus.FAILED, error=type(error).__name__[:300],
            finished_at=timezone.now(),
        )  # fmt: skip
        raise
    replay.status = ReplayStatus.READY
    replay.report = report.as_dict()
    replay.finished_at = timezone.now()
    replay.save(update_fields=["status", "report", "finished_at"])
    return replay


def _enforced(toml: str) -> Policy:
    """The policy an SDK enforces for an active text: the text's rules, or the fail-safe
    empty policy when it no longer loads (an SDK refuses such a text and routes every
    action to a human)."""
    loaded = load_policy(toml)
    if loaded.policy is not None:
        return loaded.policy
    empty = load_policy(EMPTY_POLICY_TOML).policy
    assert empty is not None
    return empty
