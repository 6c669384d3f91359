"""One webhook attempt: claim the delivery, render and sign the body, POST it, record the
outcome and schedule the next attempt (exponential backoff with jitter) or give up; the
task that runs it, and what the worker's lease does for the deliveries being sent."""

from __future__ import annotations

import logging
import random
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone
from django_tasks import task
from django_tasks_db.models import DBTaskResult
from standardwebhooks import Webhook

from apps.common.encryption import SecretUndecryptable
from apps.common.tasks import DELIVERIES_QUEUE, enqueue
from apps.common.workers import RUNNING, InFlight, Reclaimed, lease
from apps.events.destinations import PostResult, post
from apps.events.emails import send_endpoint_disabled_email
from apps.events.models import Delivery, DeliveryStatus, Event, WebhookEndpoint
from apps.events.payloads import render
from apps.events.subscriptions import forget_subscribers

logger = logging.getLogger(__name__)


def rotating(endpoint: WebhookEndpoint) -> bool:
    """Whether the previous secret still signs beside the current one. Read from its expiry
    alone (a rotation sets both), so the pages that say so never decrypt a secret."""
    previous_until = endpoint.previous_secret_expires_at
    return previous_until is not None and previous_until > timezone.now()


def signing_secrets(endpoint: WebhookEndpoint) -> list[str]:
    """The secrets that sign now: the current one, and the previous one during a rotation.
    Raises SecretUndecryptable when SECRETS_ENCRYPTION_KEYS cannot decrypt one."""
    keys = [endpoint.secret]
    if rotating(endpoint) and endpoint.previous_secret:
        keys.append(endpoint.previous_secret)
    return keys


def signed_headers(
    endpoint: WebhookEndpoint, event: Event, body: str, now: datetime
) -> dict[str, str]:
    """``webhook-id`` (the event's: the same on every attempt), ``webhook-timestamp`` (this
    attempt's) and ``webhook-signature`` (one ``v1,`` signature per signing secret)."""
    signatures = [
        Webhook(secret).sign(event.event_id, now, body) for secret in signing_secrets(endpoint)
    ]
    return {
        "webhook-id": event.event_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def backoff_seconds(attempts: int) -> float:
    """The wait after the ``attempts``-th failure: base * 4^(attempts-1), capped, times a
    random factor in [0.75, 1.25) so endpoints that failed together do not retry together."""
    base = float(settings.WEBHOOK_RETRY_BASE_SECONDS)
    delay = min(base * 4 ** (attempts - 1), float(settings.WEBHOOK_RETRY_MAX_DELAY_SECONDS))
    return float(delay * (0.75 + random.random() / 2))  # noqa: S311 (jitter, not a secret)


def _claim(delivery_id: int, now: datetime) -> bool:
    """Take the delivery for this attempt: exactly one worker wins (one UPDATE), and a
    claim of a worker that died runs out after ``claimed_until``."""
    hold = timedelta(seconds=3 * settings.WEBHOOK_TIMEOUT_SECONDS + 30)
    return bool(
        Delivery.objects.filter(pk=delivery_id, next_attempt_at__lte=now)
        .filter(
            Q(status=DeliveryStatus.PENDING)
            | Q(status=DeliveryStatus.SENDING, claimed_until__lt=now)
        )
        .update(status=DeliveryStatus.SENDING, claimed_until=now + hold)
    )


def delivery_attempt(delivery_id: int) -> str:
    """One attempt of a due delivery; what happened, for the task's result."""
    now = timezone.now()
    if not _claim(delivery_id, now):
        return "not due"
    delivery = Delivery.objects.select_related("endpoint", "event").filter(pk=delivery_id).first()
    if delivery is None:
        return "gone"  # its endpoint was deleted meanwhile
    endpoint = delivery.endpoint
    if not endpoint.enabled:
        Delivery.objects.filter(pk=delivery_id).update(
            status=DeliveryStatus.FAILED, claimed_until=None, last_error="endpoint disabled"
        )
        return "endpoint disabled"
    started = time.monotonic()
    try:
        body = render(endpoint, delivery.event)
        result = post(
            endpoint.url, body.encode(), signed_headers(endpoint, delivery.event, body, now)
        )
    except SecretUndecryptable as e:
        # A deployment's fault (a key missing from SECRETS_ENCRYPTION_KEYS, or SECRET_KEY
        # changed while the key was derived from it), not the receiver's: nothing was sent.
        # Retried as a failed attempt (a worker with the right keys delivers it), but it
        # does not count towards disabling the endpoint.
        logger.error("webhook delivery %s not sent: %s", delivery_id, e)
        return _record(delivery, PostResult(None, 0, f"not sent: {e}", b""), receiver=False)
    except Exception as e:
        # ``post`` answers for whatever the receiver does; this is a fault of ours. It is
        # still an attempt (counted, retried, towards disabling the endpoint): a delivery
        # left ``sending`` would be claimed and fail again at every sweep, forever.
        logger.exception("webhook delivery %s: the attempt failed", delivery_id)
        elapsed = int((time.monotonic() - started) * 1000)
        result = PostResult(None, elapsed, f"internal error ({type(e).__name__})", b"")
    return _record(delivery, result)


def _record(delivery: Delivery, result: PostResult, *, receiver: bool = True) -> str:
    """Record an attempt's outcome; a failure counts towards disabling the endpoint when
    the ``receiver`` is the one that failed."""
    now = timezone.now()
    endpoint = delivery.endpoint
    delivery.attempts += 1
    delivery.last_attempt_at = now
    delivery.last_status_code = result.status
    delivery.last_latency_ms = result.latency_ms
    delivery.claimed_until = None
    fields = ["attempts", "last_attempt_at", "last_status_code", "last_latency_ms",
              "claimed_until", "status", "last_error"]  # fmt: skip
    with transaction.atomic():
        if result.ok:
            delivery.status = DeliveryStatus.SUCCEEDED
            delivery.delivered_at = now
            delivery.last_error = ""
            delivery.save(update_fields=[*fields, "delivered_at"])
            WebhookEndpoint.objects.filter(pk=endpoint.pk, consecutive_failures__gt=0).update(
                consecutive_failures=0
            )
            return "delivered"
        delivery.last_error = result.error or f"HTTP {result.status}"
        disabled = receiver and _count_failure(endpoint)
        next_at = now + timedelta(seconds=backoff_seconds(delivery.attempts))
        window_end = delivery.created_at + timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_SECONDS)
        if disabled or next_at > window_end:
            delivery.status = DeliveryStatus.FAILED
            delivery.save(update_fields=fields)
            return "failed"
        delivery.status = DeliveryStatus.PENDING
        delivery.next_attempt_at = next_at
        delivery.save(update_fields=[*fields, "next_attempt_at"])
        enqueue(deliver_webhook, delivery.pk, run_after=next_at)
    return "will retry"


def _count_failure(endpoint: WebhookEndpoint) -> bool:
    """One more failure in a row for ``endpoint``; whether that disabled it (past
    WEBHOOK_DISABLE_AFTER_FAILURES, its owners told by email)."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    failures = WebhookEndpoint.objects.values_list("consecutive_failures", flat=True).get(
        pk=endpoint.pk
    )
    if failures < settings.WEBHOOK_DISABLE_AFTER_FAILURES:
        return False
    disabled = bool(
        WebhookEndpoint.objects.filter(pk=endpoint.pk, enabled=True).update(
            enabled=False,
            disabled_reason=f"disabled after {failures} failed attempts in a row",
        )
    )
    if disabled:
        transaction.on_commit(lambda: forget_subscribers(endpoint.org_id))
        enqueue(send_endpoint_disabled_email, endpoint.pk)
    return disabled


@task(queue_name=DELIVERIES_QUEUE)
def deliver_webhook(delivery_id: int) -> str:
    return delivery_attempt(delivery_id)


# The task's path as rows enqueued before it moved here name it (apps.events.tasks keeps
# an alias for one release): the lease's hooks below treat those rows as its own.
DELIVER_PATHS = (deliver_webhook.module_path, "apps.events.tasks.deliver_webhook")


def delivery_claims_extend(running: list[InFlight], now: datetime) -> None:
    """The worker heartbeat's hook (apps.common.workers): extend the claims of the
    deliveries this process is sending, so a slow receiver never makes a claim run out
    under a worker that is still on it. Never shortens a claim; a delivery that is no
    longer "sending" (the attempt was recorded meanwhile) is left alone."""
    sending = [item.args[0] for item in running if item.task_path in DELIVER_PATHS and item.args]
    if sending:
        Delivery.objects.filter(pk__in=sending, status=DeliveryStatus.SENDING).update(
            claimed_until=Greatest(F("claimed_until"), now + lease())
        )


def delivery_claims_release(reclaimed: Reclaimed) -> None:
    """The worker reclaim's hook (apps.common.workers). A webhook attempt whose worker
    died holds its delivery's claim until the claim runs out (a few timeouts); its task,
    queued again, could then only answer "not due" and the delivery would wait for the
    sweep. The claim is given up at once, unless a live worker is running another task for
    the same delivery (which then holds the claim)."""
    if not reclaimed.requeued:
        return
    vouched = reclaimed.vouched
    live = set().union(*vouched.values()) if vouched else set()
    for args_kwargs in DBTaskResult.objects.filter(
        pk__in=reclaimed.requeued, task_path__in=DELIVER_PATHS
    ).values_list("args_kwargs", flat=True):
        args = args_kwargs.get("args") or []
        if not args:
            continue
        running_for_it = DBTaskResult.objects.filter(
            status=RUNNING, task_path__in=DELIVER_PATHS, args_kwargs__args=args
        ).values_list("id", flat=True)
        if any(str(task_id) in live for task_id in running_for_it):
            continue
        Delivery.objects.filter(pk=args[0], status=DeliveryStatus.SENDING).update(
            claimed_until=reclaimed.now
        )
