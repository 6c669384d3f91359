"""What an event looks like on the wire and in a message: the Standard Webhooks body,
the one-line Slack summary (also the first line of an approval email), and the body an
endpoint's format asks for."""

from __future__ import annotations

import json
from typing import Any

from apps.common.timestamps import utc_text
from apps.events.models import EndpointFormat, Event, WebhookEndpoint


def standard_body(event: Event) -> str:
    """The Standard Webhooks payload: ``type``, ``timestamp`` (the event's) and ``data``."""
    return json.dumps(
        {
            "type": event.type,
            "timestamp": utc_text(event.created_at),
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
    if kind == "policy.break_glass":
        return (
            f":rotating_light: Policy `{data.get('policy_id')}` activated without the quorum "
            f"({data.get('approved_count')}/{data.get('quorum')} approvals): {data.get('reason')}"
        )
    if kind == "policy.stale_agents":
        return (
            f":hourglass_flowing_sand: {data.get('stale_count')} agent(s) still enforce a "
            f"replaced policy {data.get('stale_after_seconds')} s after `{data.get('policy_id')}` "
            "was deployed"
        )
    if kind == "quota.threshold":
        return (
            f":warning: {data.get('threshold_percent')}% of the monthly receipt cap reached "
            f"({data.get('count')}/{data.get('cap')}, {data.get('month')})"
        )
    if kind.startswith("api_key."):
        verb = "created" if kind == "api_key.created" else "revoked"
        return f":key: API key {verb}: `{data.get('prefix')}` {data.get('label') or ''}".rstrip()
    if kind == "legal_hold.set":
        return f":lock: Legal hold set on {_hold_cover(data)}: {data.get('reason')}"
    if kind == "legal_hold.released":
        return f":unlock: Legal hold released on {_hold_cover(data)}: {data.get('release_reason')}"
    return f"{kind}"


def _hold_cover(data: dict[str, Any]) -> str:
    if data.get("scope") == "session":
        return f"session `{data.get('session_id')}`"
    if data.get("scope") == "range":
        return f"{data.get('from') or '…'} to {data.get('to') or '…'}"
    return "the whole org"


def render(endpoint: WebhookEndpoint, event: Event) -> str:
    if endpoint.format == EndpointFormat.SLACK:
        return json.dumps({"text": slack_text(event)}, ensure_ascii=False)
    return standard_body(event)
