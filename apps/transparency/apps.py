from django.apps import AppConfig


class TransparencyConfig(AppConfig):
    name = "apps.transparency"
    verbose_name = "Transparency log"

    def ready(self) -> None:
        from apps.transparency import checks, signals  # noqa: F401  (registers them)
