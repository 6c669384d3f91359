from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    verbose_name = "Orgs, keys and members"

    def ready(self) -> None:
        from apps.tenancy import (
            checks,
            console_tokens,
            credential_limits,
            key_cache,
            org_context,
        )

        org_context.connect_signals()
        console_tokens.connect_signals()
        credential_limits.connect_signals()
        key_cache.connect_signals()
        checks.register()
