from django.apps import AppConfig


class TransparencyConfig(AppConfig):
    name = "apps.transparency"
    verbose_name = "Transparency log"

    def ready(self) -> None:
        from apps.common import scheduling
        from apps.transparency import checks, signals, tasks  # noqa: F401  (registers them)

        scheduling.register(*tasks.SCHEDULE)
