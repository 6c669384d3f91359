from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    verbose_name = "Orgs, keys and members"

    def ready(self) -> None:
        from apps.tenancy import checks, org_context

        org_context.connect_signals()
        checks.register()
