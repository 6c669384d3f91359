from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "apps.events"
    verbose_name = "Events and notifications"

    def ready(self) -> None:
        from django.conf import settings
        from django.core.checks import register

        from apps.common import outbound, scheduling, workers
        from apps.events import checks, delivery, emails, tasks
        from apps.events.services import event_record
        from apps.events.subscriptions import is_subscribed

        outbound.register_sink(event_record if settings.EVENTS_ENABLED else None, is_subscribed)
        # Direct emails go whatever EVENTS_ENABLED says: they are not org events.
        outbound.register_mailer("invitation", emails.enqueue_invitation_email)
        register(checks.private_destinations_allowed, "mirror", deploy=True)
        scheduling.register(*tasks.SCHEDULE)
        workers.on_beat(delivery.delivery_claims_extend)
        workers.on_reclaim(delivery.delivery_claims_release)
