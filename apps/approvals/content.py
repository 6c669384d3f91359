"""A suspended receipt's content as approvals read it: whether it waits for a human, its
suspend ticket, its signed approval terms. Pure functions of the content."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.receipts.verifier import content_hash


def is_suspended(content: dict[str, Any]) -> bool:
    """A lifecycle ``suspended`` receipt, or an L0 action the policy routed to a human
    (the body an L1 receipt later supersedes)."""
    if content.get("kind") == "suspended":
        return True
    policy = content.get("policy")
    return (
        content.get("kind", "action") == "action"
        and content.get("trust_level") == "L0"
        and isinstance(policy, dict)
        and policy.get("decision_path") == "require_approval"
    )


# The members of an action that name "the same action" across a session's lifecycle links
# (receipts.md §13.3, the action-spec hash): absent members count as null.
_ACTION_SPEC = ("verb", "domain", "action", "tool_name", "target_host", "workflow", "account",
                "fields")  # fmt: skip


def action_spec(content: dict[str, Any]) -> dict[str, Any]:
    """What a lifecycle link and the suspended receipt it answers have in common."""
    action = content.get("action")
    members = action if isinstance(action, dict) else {}
    return {name: members.get(name) for name in _ACTION_SPEC}


def ticket_hash(content: dict[str, Any]) -> str:
    """The suspend ticket the SDK hands its user for ``content`` (server.md §6): the content
    hash (receipts.md §4-§5) with ``agent_identity`` empty, as before the operator's key
    was stamped on it."""
    return content_hash({**content, "agent_identity": ""})


def signed_approval_block(content: dict[str, Any] | None) -> dict[str, Any]:
    suspension = (content or {}).get("suspension")
    approval = suspension.get("approval") if isinstance(suspension, dict) else None
    return approval if isinstance(approval, dict) else {}


def parse_signed_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None
