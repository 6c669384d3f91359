"""The policy app's background work: reporting agents still enforcing a replaced policy
version some time after a deploy (``policy.stale_agents``, :mod:`apps.policy.fleet`),
replaying a proposed policy over a window too large to replay in the request
(``apps.policy.services.policy_replay_request`` queues it), and deleting finished replays
past their retention (``apps.policy.services.policy_replays_prune``)."""

from __future__ import annotations

from django.conf import settings
from django_tasks import task

from apps.common.scheduling import Periodic
from apps.common.tasks import PERIODIC_QUEUE
from apps.policy.fleet import policy_stale_agents_notify
from apps.tenancy.org_context import activate_all_orgs, activate_default


@task(queue_name=PERIODIC_QUEUE)
def check_stale_agents() -> int:
    """Check the deploys ``POLICY_STALE_AGENT_SECONDS`` old for keys still enforcing a
    replaced version; the events emitted. Across orgs, as operator commands run."""
    activate_all_orgs()
    try:
        return policy_stale_agents_notify()
    finally:
        activate_default()


@task()
def run_policy_replay(replay_pk: int) -> str:
    """Replay the stored request and store its report; its status once done."""
    # Imported here: the service imports this module to queue the task.
    from apps.policy.services import policy_replay_run

    return str(policy_replay_run(replay_pk=replay_pk).status)


@task(queue_name=PERIODIC_QUEUE)
def prune_policy_replays() -> int:
    """Delete finished policy replays past ``POLICY_REPLAY_RETENTION_DAYS``; how many.
    Across orgs, as operator commands run."""
    # Imported here, as in run_policy_replay: the service imports this module.
    from apps.policy.services import policy_replays_prune

    activate_all_orgs()
    try:
        return policy_replays_prune()
    finally:
        activate_default()


SCHEDULE = (
    # POLICY_STALE_AGENT_CHECK_SECONDS = 0 turns the check (and the event) off.
    Periodic(
        "check_stale_agents",
        check_stale_agents,
        lambda: settings.POLICY_STALE_AGENT_CHECK_SECONDS,
    ),
    # RETENTION_PRUNE_SECONDS = 0 turns every retention prune off, this one too.
    Periodic(
        "prune_policy_replays", prune_policy_replays, lambda: settings.RETENTION_PRUNE_SECONDS
    ),
)
