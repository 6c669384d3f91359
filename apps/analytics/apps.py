from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "apps.analytics"
    verbose_name = "Analytics"

    def ready(self) -> None:
        from apps.analytics import tasks
        from apps.common import scheduling

        scheduling.register(*tasks.SCHEDULE)
