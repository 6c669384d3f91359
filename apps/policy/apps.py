from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "apps.policy"
    verbose_name = "Policy"

    def ready(self) -> None:
        from apps.common import scheduling
        from apps.policy import tasks

        scheduling.register(*tasks.SCHEDULE)
