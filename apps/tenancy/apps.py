from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    verbose_name = "Orgs, keys and members"
