"""The text of the emails events send (plain text, through Django's email framework)."""

from __future__ import annotations

from apps.events.delivery import slack_text
from apps.events.models import Event, WebhookEndpoint

_TITLES = {
    "approval.opened": "Approval opened",
    "approval.waiting_for_approvers": "Approval waiting for approvers",
    "approval.vote_recorded": "Vote recorded",
    "approval.decided": "Approval decided",
}


def event_email(event: Event) -> tuple[str, str]:
    data = event.payload
    subject = (
        f"[{event.org.name}] {_TITLES.get(event.type, event.type)}: {data.get('approval_id', '')}"
    )
    lines = [
        slack_text(event).split(" ", 1)[-1].replace("`", ""),
        "",
        f"Approval: {data.get('approval_id')}",
        f"Action hash: {data.get('action_hash')}",
        f"Status: {data.get('status')}",
    ]
    if data.get("expires_at"):
        lines.append(f"Expires: {data['expires_at']}")
    if data.get("signing_url"):
        lines += ["", f"Review and sign: {data['signing_url']}"]
    lines += ["", "You receive this because you opted in to email for this event in the console."]
    return subject, "\n".join(lines) + "\n"


def endpoint_disabled_email(endpoint: WebhookEndpoint) -> tuple[str, str]:
    subject = f"[{endpoint.org.name}] endpoint.disabled: webhook endpoint {endpoint.endpoint_id}"
    body = (
        f"The webhook endpoint {endpoint.url} ({endpoint.endpoint_id}) of {endpoint.org.name} "
        f"was disabled: {endpoint.disabled_reason}.\n\n"
        "Events are no longer sent to it. Fix the receiver, then enable the endpoint again in "
        'the console or with PATCH /v1/webhooks/{id} {"enabled": true}; failed deliveries can '
        "be sent again from its delivery log.\n"
    )
    return subject, body
