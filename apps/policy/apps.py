from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "apps.policy"
    verbose_name = "Policy"
