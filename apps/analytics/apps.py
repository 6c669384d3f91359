from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "apps.analytics"
    verbose_name = "Analytics"

    def ready(self) -> None:
        from apps.analytics import tasks
        from apps.analytics.selectors import receipts_received_since
        from apps.common import scheduling
        from apps.policy.replay import window_count_register

        scheduling.register(*tasks.SCHEDULE)
        # A policy replay sizes its window from the rollups, which sit a floor above it.
        window_count_register(lambda org, day: receipts_received_since(org=org, day=day))
