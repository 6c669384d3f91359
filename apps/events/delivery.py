"""One webhook attempt: claim the delivery, render and sign the body, POST it, record the
outcome and schedule the next attempt (exponential backoff with jitter) or give up."""

from __future__ import annotations

import json
import logging
import random
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from standardwebhooks import Webhook

from apps.events.destinations import PostResult, post
from apps.events.models import Delivery, DeliveryStatus, EndpointFormat, Event, WebhookEndpoint
from apps.events.services import signing_secrets

logger = logging.getLogger(__name__)


def standard_body(event: Event) -> str:
    """The Standard Webhooks payload: ``type``, ``timestamp`` (the event's) and ``data``."""
    return json.dumps(
        {
            "type": event.type,
            "timestamp": event.created_at.isoformat().replace("+00:00", "Z"),
            "data": event.payload,
        },
        separators=(",", ":"),
        ensure_ascii=False,
        sort_keys=True,
    )


def _approval_line(data: dict[str, Any]) -> str:
    summary = data.get("summary") or {}
    action = summary.get("action") or {}
    what = " ".join(part for part in (action.get("workflow"), action.get("verb")) if part)
    who = summary.get("agent_identity") or ""
    text = f"`{data.get('approval_id')}`"
    if what:
        text += f" {what}"
    if who:
        text += f" by {who}"
    return text


def slack_text(event: Event) -> str:
    """A one-message summary for a Slack incoming webhook (mrkdwn)."""
    data: dict[str, Any] = event.payload
    kind = event.type
    if kind.startswith("approval."):
        line = _approval_line(data)
        url = data.get("signing_url")
        link = f" <{url}|Open in Countersign>" if url else ""
        if kind == "approval.opened":
            return f":inbox_tray: Approval opened: {line}.{link}"
        if kind == "approval.waiting_for_approvers":
            return (
                f":hourglass: Approval waiting for approvers ({data.get('approved_count', 0)}"
                f"/{data.get('threshold')}): {line}.{link}"
            )
        if kind == "approval.vote_recorded":
            return f":ballot_box: Vote recorded ({data.get('decision')}): {line}.{link}"
        return f":white_check_mark: Approval {data.get('outcome')}: {line}."
    if kind == "receipt.refused":
        return (
            f":no_entry: Receipt refused ({data.get('kind')}): `{data.get('action_hash') or '-'}`"
        )
    if kind == "policy.deployed":
        return (
            f":scroll: Policy deployed: `{data.get('policy_id')}` ({data.get('rule_count')} rules)"
        )
    if kind == "quota.threshold":
        return (
            f":warning: {data.get('threshold_percent')}% of the monthly receipt cap reached "
            f"({data.get('count')}/{data.get('cap')}, {data.get('month')})"
        )
    if kind.startswith("api_key."):
        verb = "created" if kind == "api_key.created" else "revoked"
        return f":key: API key {verb}: `{data.get('prefix')}` {data.get('label') or ''}".rstrip()
    return f"{kind}"


def render(endpoint: WebhookEndpoint, event: Event) -> str:
    if endpoint.format == EndpointFormat.SLACK:
        return json.dumps({"text": slack_text(event)}, ensure_ascii=False)
    return standard_body(event)


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
    except Exception as e:
        # ``post`` answers for whatever the receiver does; this is a fault of ours. It is
        # still an attempt (counted, retried, towards disabling the endpoint): a delivery
        # left ``sending`` would be claimed and fail again at every sweep, forever.
        logger.exception("webhook delivery %s: the attempt failed", delivery_id)
        elapsed = int((time.monotonic() - started) * 1000)
        result = PostResult(None, elapsed, f"internal error ({type(e).__name__})", b"")
    return _record(delivery, result)


def _record(delivery: Delivery, result: PostResult) -> str:
    from apps.events import tasks

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
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            consecutive_failures=F("consecutive_failures") + 1
        )
        failures = WebhookEndpoint.objects.values_list("consecutive_failures", flat=True).get(
            pk=endpoint.pk
        )
        disabled = False
        if failures >= settings.WEBHOOK_DISABLE_AFTER_FAILURES:
            disabled = bool(
                WebhookEndpoint.objects.filter(pk=endpoint.pk, enabled=True).update(
                    enabled=False,
                    disabled_reason=f"disabled after {failures} failed attempts in a row",
                )
            )
            if disabled:
                from apps.events.services import forget_subscribers

                transaction.on_commit(lambda: forget_subscribers(endpoint.org_id))
                tasks.enqueue(tasks.send_endpoint_disabled_email, endpoint.pk)
        next_at = now + timedelta(seconds=backoff_seconds(delivery.attempts))
        window_end = delivery.created_at + timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_SECONDS)
        if disabled or next_at > window_end:
            delivery.status = DeliveryStatus.FAILED
            delivery.save(update_fields=fields)
            return "failed"
        delivery.status = DeliveryStatus.PENDING
        delivery.next_attempt_at = next_at
        delivery.save(update_fields=[*fields, "next_attempt_at"])
        tasks.enqueue(tasks.deliver_webhook, delivery.pk, run_after=next_at)
    return "will retry"
