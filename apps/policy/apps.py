from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "apps.policy"
    verbose_name = "Policy"

    def ready(self) -> None:
        from apps.common import scheduling, workers
        from apps.policy import tasks
        from apps.policy.services import policy_replays_settle

        workers.on_reclaim(policy_replays_settle)
        scheduling.register(*tasks.SCHEDULE)
