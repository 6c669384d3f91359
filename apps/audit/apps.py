from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "apps.audit"
    verbose_name = "Audit"

    def ready(self) -> None:
        from apps.audit import tasks
        from apps.audit.exports import evidence_exports_settle
        from apps.common import scheduling, workers

        workers.on_reclaim(evidence_exports_settle)
        scheduling.register(*tasks.SCHEDULE)
