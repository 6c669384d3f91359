from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "apps.analytics"
    verbose_name = "Analytics"
