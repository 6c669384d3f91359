"""The policy app's background work: replaying a proposed policy over a window too large
to replay in the request (``apps.policy.services.policy_replay_request`` queues it)."""

from __future__ import annotations

from django_tasks import task


@task()
def run_policy_replay(replay_pk: int) -> str:
    """Replay the stored request and store its report; its status once done."""
    # Imported here: the service imports this module to queue the task.
    from apps.policy.services import policy_replay_run

    return str(policy_replay_run(replay_pk=replay_pk).status)
