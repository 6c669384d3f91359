from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "apps.approvals"
    verbose_name = "Approvals"
