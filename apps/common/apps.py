from django.apps import AppConfig
from django.core.checks import Tags, register
from django.core.signals import got_request_exception, request_finished
from django.db.backends.signals import connection_created


class CommonConfig(AppConfig):
    name = "apps.common"
    verbose_name = "Common"

    def ready(self) -> None:
        # The app's modules load once the app registry is ready, as Django prescribes.
        from apps.common import checks, scheduling, workers
        from apps.common.capacity import mark_database_unavailable, outage
        from apps.common.json_logging import clear_request_id, install_request_id_on_records

        register(checks.shared_cache_for_workers, Tags.caches)
        register(checks.metrics_across_workers, "mirror")
        register(checks.default_worker_count, Tags.caches, deploy=True)
        register(checks.secrets_key_derived, Tags.security, deploy=True)
        got_request_exception.connect(
            mark_database_unavailable, dispatch_uid="mirror.database_unavailable"
        )
        # A connection opened: the database answers again (an outage's log ends).
        connection_created.connect(outage.end, dispatch_uid="mirror.database_outage_ended")
        request_finished.connect(clear_request_id, dispatch_uid="mirror.clear_request_id")
        install_request_id_on_records()
        scheduling.register(*workers.SCHEDULE)
