from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "apps.approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from apps.approvals import tasks
        from apps.common import scheduling

        scheduling.register(*tasks.SCHEDULE)
