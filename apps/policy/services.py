"""The one write path for policy: ``policy_deploy`` (API, console and command alike), and
the replay of a proposed policy (``policy_replay_request``), stored for whoever asked
until its retention is up (``policy_replays_prune``).

With the org's ``policy_quorum`` at 0 a deploy activates at once. Above 0 it becomes a
``PolicyProposal`` that activates when that many approver keys approved it
(``apps.policy.votes``), or at once by an owner's break-glass, which the quorum may
approve after the fact.
"""

from __future__ import annotations

import difflib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.common import outbound
from apps.common.errors import InvalidInput
from apps.common.tasks import enqueue
from apps.common.timestamps import utc_text
from apps.common.workers import Reclaimed
from apps.policy.errors import (
    BreakGlassRefused,
    PolicyFloorBypass,
    PolicyParseRejected,
    PolicyPinMismatch,
    PolicyProposalOpen,
)
from apps.policy.models import (
    VOTING_STATUSES,
    DeployChannel,
    PolicyDeployment,
    PolicyHead,
    PolicyProposal,
    PolicyReplay,
    PolicyVersion,
    ProposalStatus,
    ReplayStatus,
)
from apps.policy.replay import policy_replay_compute, read_in_index_order, window_receipts
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

MAX_BREAK_GLASS_REASON = 2000


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


@dataclass(frozen=True)
class PolicyChange:
    """What a deploy did: ``version`` is the text's version; ``proposal`` is set when the
    change waits for approvals, or was activated by break-glass."""

    version: PolicyVersion
    proposal: PolicyProposal | None = None

    @property
    def activated(self) -> bool:
        """Whether ``version`` is the active pin now (a waiting proposal: not yet)."""
        return self.proposal is None or self.proposal.status != ProposalStatus.OPEN


def policy_deploy(
    *,
    org: Org,
    toml: str,
    expected_policy_hash: str | None = None,
    actor: Actor = OPERATOR,
    break_glass_reason: str | None = None,
) -> PolicyChange:
    """Validate ``toml`` (line endings normalised: ``policy_text_normalize``), then
    activate it for ``org``, or, when the org's ``policy_quorum`` is above 0, propose it.

    Validation happens before any write. The org's ``PolicyHead`` row is locked for the
    pin comparison and the switch, so of concurrent deploys expecting the same hash exactly
    one wins and the others get ``PolicyPinMismatch``. Deploying the active text again is a
    no-op that returns the active version (no history row, no proposal); deploying an older
    text re-activates its version under its old id and records the deployment (its channel
    is how the actor acts: console, API or command) and the org's audit event.

    With a quorum: a proposal (the text's version, the pin it replaces, the diff) waits for
    approvals, refused while another proposal is open (409). ``break_glass_reason`` (an
    owner's act: the callers check the role) activates it at once without the quorum; it
    is recorded, emits ``policy.break_glass`` and still takes the votes that approve it
    afterwards.
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
            return PolicyChange(version=active_version)
        # Read under the head's lock: a quorum set meanwhile applies to this deploy.
        quorum = Org.objects.values_list("policy_quorum", flat=True).get(pk=org.pk)
        if break_glass_reason is not None:
            reason = _break_glass_reason(break_glass_reason, quorum)
        version, _ = PolicyVersion.objects.get_or_create(
            org=org,
            policy_hash=new_hash,
            defaults={
                "policy_id": policy_id_for_hash(new_hash),
                "toml": toml,
                "rule_count": len(policy.rules),
            },
        )
        if quorum == 0:
            policy_activate_locked(
                org=org, head=head, version=version, previous=active_version, actor=actor
            )
            return PolicyChange(version=version)
        if break_glass_reason is not None:
            return PolicyChange(
                version=version,
                proposal=_break_glass(
                    org=org, head=head, version=version, previous=active_version,
                    quorum=quorum, reason=reason, actor=actor,
                ),
            )  # fmt: skip
        proposal = _propose(
            org=org, version=version, previous=active_version, quorum=quorum, actor=actor
        )
    return PolicyChange(version=version, proposal=proposal)


def _break_glass_reason(text: str, quorum: int) -> str:
    if quorum == 0:
        raise BreakGlassRefused(
            "this org's policy changes need no approvals (policy_quorum 0): deploy without "
            "break_glass_reason"
        )
    reason = text.strip()
    if not reason:
        raise BreakGlassRefused("break_glass_reason: write why the quorum cannot wait")
    if len(reason) > MAX_BREAK_GLASS_REASON:
        raise BreakGlassRefused(f"break_glass_reason: at most {MAX_BREAK_GLASS_REASON} characters")
    return reason


def policy_text_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """The unified diff a proposal carries (the text it replaces against its own)."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""
    )
    return "\n".join(lines)


def _open_proposal(org: Org) -> PolicyProposal | None:
    return (
        PolicyProposal.objects.filter(org=org, status=ProposalStatus.OPEN)
        .select_related("version")
        .first()
    )


def _propose(
    *,
    org: Org,
    version: PolicyVersion,
    previous: PolicyVersion | None,
    quorum: int,
    actor: Actor,
) -> PolicyProposal:
    """A new open proposal (under the head's lock, so two deploys never both open one)."""
    already = _open_proposal(org)
    if already is not None:
        raise PolicyProposalOpen(
            f"proposal {already.version.policy_id} is still open for this org: it must be "
            "activated, rejected or superseded first",
            open_policy_id=already.version.policy_id,
        )
    previous_name = previous.policy_id if previous else "(fail-safe empty policy)"
    try:
        with transaction.atomic():
            proposal = PolicyProposal.objects.create(
                org=org, version=version, previous_version=previous, quorum=quorum,
                diff=policy_text_diff(previous.toml if previous else "", version.toml,
                                      previous_name, version.policy_id),
                proposed_by=actor.user if isinstance(actor.user, User) else None,
                proposed_via=DeployChannel(actor.via), proposed_by_name=actor.name[:150],
            )  # fmt: skip
    except IntegrityError:  # the one-open constraint, should the lock ever be bypassed
        raise PolicyProposalOpen(
            "another proposal is open for this org", open_policy_id=""
        ) from None
    # What the change would do, on the receipts it will govern: replayed now (a small
    # window) or by the worker (the proposal names the replay; its report fills in).
    replay = policy_replay_request(
        org=org, toml=version.toml, days=settings.POLICY_PROPOSAL_REPLAY_DAYS,
        requested_by=actor.user if isinstance(actor.user, User) else None, for_proposal=True,
    )  # fmt: skip
    proposal.replay = {"replay_id": replay.replay_id, "days": replay.days}
    proposal.save(update_fields=["replay"])
    org_audit_record(
        org=org, kind=AuditKind.POLICY_PROPOSED, actor=actor,
        summary=f"policy {version.policy_id} proposed: {quorum} approval(s) needed",
        detail={"policy_id": version.policy_id, "policy_hash": version.policy_hash,
                "previous_policy_hash": previous.policy_hash if previous else "",
                "quorum": quorum},
    )  # fmt: skip
    return proposal


def _break_glass(
    *,
    org: Org,
    head: PolicyHead,
    version: PolicyVersion,
    previous: PolicyVersion | None,
    quorum: int,
    reason: str,
    actor: Actor,
) -> PolicyProposal:
    """Activate without the quorum: the open proposal of this very change becomes the
    break-glass one (its votes so far stay counted), any other is superseded by it."""
    now = timezone.now()
    proposal = _open_proposal(org)
    if proposal is None or proposal.version_id != version.pk:
        previous_name = previous.policy_id if previous else "(fail-safe empty policy)"
        if proposal is not None:
            _close(proposal, ProposalStatus.SUPERSEDED, now)
        proposal = PolicyProposal.objects.create(
            org=org, version=version, previous_version=previous, quorum=quorum,
            status=ProposalStatus.BREAK_GLASS,
            diff=policy_text_diff(previous.toml if previous else "", version.toml,
                                  previous_name, version.policy_id),
            proposed_by=actor.user if isinstance(actor.user, User) else None,
            proposed_via=DeployChannel(actor.via), proposed_by_name=actor.name[:150],
        )  # fmt: skip
    proposal.status = ProposalStatus.BREAK_GLASS
    proposal.break_glass_reason = reason
    proposal.break_glass_at = now
    proposal.deployment = policy_activate_locked(
        org=org, head=head, version=version, previous=previous, actor=actor, now=now,
        proposal=proposal,
    )  # fmt: skip
    proposal.save()
    org_audit_record(
        org=org, kind=AuditKind.POLICY_BREAK_GLASS, actor=actor,
        summary=f"policy {version.policy_id} activated without the quorum: {reason}",
        detail={"policy_id": version.policy_id, "policy_hash": version.policy_hash,
                "previous_policy_hash": previous.policy_hash if previous else "",
                "quorum": quorum, "approved_count": proposal.approved_count,
                "reason": reason},
    )  # fmt: skip
    outbound.emit(
        org_id=org.pk,
        event_type="policy.break_glass",
        payload=lambda: {
            "policy_id": version.policy_id,
            "policy_hash": version.policy_hash,
            "previous_policy_hash": previous.policy_hash if previous else EMPTY_POLICY_HASH,
            "quorum": quorum,
            "approved_count": proposal.approved_count,
            "reason": reason,
            "activated_by": actor.name or None,
            "activated_at": utc_text(now),
        },
    )
    return proposal


def _close(proposal: PolicyProposal, status: ProposalStatus, now: datetime) -> None:
    proposal.status = status
    proposal.resolved_at = now
    proposal.save(update_fields=["status", "resolved_at"])


def policy_activate_locked(
    *,
    org: Org,
    head: PolicyHead,
    version: PolicyVersion,
    previous: PolicyVersion | None,
    actor: Actor,
    now: datetime | None = None,
    proposal: PolicyProposal | None = None,
    approvers: list[dict[str, str]] | None = None,
) -> PolicyDeployment:
    """Make ``version`` the active pin on the locked ``head``: the deployment row, the
    org's audit record and the ``policy.deployed`` event (naming the approvers of a
    co-signed change), in the caller's transaction. Every other proposal still taking
    votes is superseded: the pin it was made against has moved (a break-glass one has been
    replaced)."""
    now = now or timezone.now()
    active_hash = previous.policy_hash if previous else EMPTY_POLICY_HASH
    head.version = version
    head.activated_at = now
    head.save(update_fields=["version", "activated_at"])
    deployment = PolicyDeployment.objects.create(
        org=org,
        version=version,
        previous_version=previous,
        deployed_by=actor.user if isinstance(actor.user, User) else None,
        channel=DeployChannel(actor.via),
        deployed_at=now,
    )
    others = PolicyProposal.objects.filter(org=org, status__in=VOTING_STATUSES)
    if proposal is not None:
        others = others.exclude(pk=proposal.pk)
    others.update(status=ProposalStatus.SUPERSEDED, resolved_at=now)
    how = "deployed"
    if approvers:
        how = f"deployed, approved by {len(approvers)} approver key(s)"
    elif proposal is not None and proposal.break_glass_at is not None:
        how = "deployed without the quorum (break-glass)"
    org_audit_record(
        org=org, kind=AuditKind.POLICY_DEPLOYED, actor=actor,
        summary=f"policy {version.policy_id} {how} ({version.rule_count} rules)",
        detail={"policy_id": version.policy_id, "policy_hash": version.policy_hash,
                "previous_policy_hash": active_hash,
                **({"approvers": approvers} if approvers else {}),
                **({"break_glass": True} if proposal is not None and not approvers else {})},
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
            "approvers": approvers or [],
            "break_glass": proposal is not None and not approvers,
        },
    )
    return deployment


# -- replay ---------------------------------------------------------------------------------

REPLAY_ID_PREFIX = "rpl_"


def policy_replay_request(
    *,
    org: Org,
    toml: str,
    days: int,
    requested_by: User | None = None,
    for_proposal: bool = False,
) -> PolicyReplay:
    """Replay ``toml`` (validated as a deploy would: a refusal raises the deploy's error)
    over ``org``'s verified receipts of the last ``days`` days against the active policy,
    and store the report: the one entry for the console's preview, the dashboard API's and
    a policy proposal's replay (``for_proposal``: kept past the replays' retention).

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
        for_proposal=for_proposal,
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


UNFINISHED_REPLAYS = (ReplayStatus.PENDING, ReplayStatus.RUNNING)
FINISHED_REPLAYS = (ReplayStatus.READY, ReplayStatus.FAILED)


def policy_replays_settle(reclaimed: Reclaimed) -> None:
    """The worker reclaim's hook (apps.common.workers): a replay whose task the reclaim
    failed (its worker stopped while running it ``TASK_MAX_ATTEMPTS`` times) is never run
    again, so it is failed, and whoever polls it stops waiting (and the retention deletes
    it in time). A task queued again needs nothing: it runs its replay from the start."""
    if not reclaimed.failed:
        return
    from apps.policy.tasks import run_policy_replay  # the task module imports this one

    given = DBTaskResult.objects.filter(
        pk__in=reclaimed.failed, task_path=run_policy_replay.module_path
    ).values_list("args_kwargs", flat=True)
    PolicyReplay.objects.filter(
        pk__in=[args_kwargs["args"][0] for args_kwargs in given], status__in=UNFINISHED_REPLAYS
    ).update(
        status=ReplayStatus.FAILED,
        error="interrupted: the worker replaying it stopped; ask for a new replay",
        finished_at=reclaimed.now,
    )


def policy_replays_prune(*, now: datetime | None = None) -> int:
    """Delete the finished replays (ready or failed) past ``POLICY_REPLAY_RETENTION_DAYS``
    after they finished (0: kept for ever); how many were deleted. Polled afterwards, a
    deleted replay answers not found, as an id that never was.

    Never deleted: a replay a proposal names (``for_proposal``: the proposal keeps only the
    id, so the row is its report, on its console page and through the API, for as long as
    the proposal is kept), and one pending or running, however old: its task reads the row
    as it starts and writes it as it ends, and a task may wait, or be queued again after a
    worker died, for any time. A replay whose task will never run again is failed by
    :func:`policy_replays_settle`, and goes once that is old enough.

    Bounded work per run, never a scan of the table: the oldest first, read in order
    through the partial index of finished replays no proposal names (by ``finished_at``)
    and stopped at ``RETENTION_PRUNE_BATCH`` rows (``read_in_index_order``), then deleted
    by primary key, one statement each; at most ``RETENTION_PRUNE_BATCHES_PER_RUN`` batches
    a run (a backlog is worked off over several runs).
    """
    days = settings.POLICY_REPLAY_RETENTION_DAYS
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    expired = PolicyReplay.objects.filter(
        finished_at__lt=cutoff, for_proposal=False, status__in=FINISHED_REPLAYS
    )
    oldest = expired.order_by("finished_at", "pk").values_list("pk", flat=True)
    deleted = 0
    for _ in range(settings.RETENTION_PRUNE_BATCHES_PER_RUN):
        ids = read_in_index_order(oldest[: settings.RETENTION_PRUNE_BATCH])
        if not ids:
            break
        gone, _ = PolicyReplay.objects.filter(pk__in=ids, status__in=FINISHED_REPLAYS).delete()
        deleted += gone
    return deleted


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
