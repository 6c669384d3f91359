from django.apps import AppConfig


class ReceiptsConfig(AppConfig):
    name = "apps.receipts"
    verbose_name = "Receipts"
