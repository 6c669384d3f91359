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


# The action fields that decide whether a person says yes, as the SDK's actions name them:
# how much, to whom, on what. The first present name of each group is shown.
DECISIVE_FIELDS = {
    "amount": ("amount", "amount_minor", "amount_cents", "total", "value"),
    "currency": ("currency",),
    "payee": ("payee", "recipient", "beneficiary", "to", "vendor"),
    "target": ("target", "resource", "path", "url", "table", "account_id"),
}
_SHOWN_TEXT = 80


def _shown(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= _SHOWN_TEXT else text[: _SHOWN_TEXT - 1] + "…"


def _member_object(parent: dict[str, Any], name: str) -> dict[str, Any]:
    value = parent.get(name)
    return value if isinstance(value, dict) else {}


def approval_request(content: dict[str, Any] | None) -> dict[str, Any]:
    """What a suspended action asks, for the approval inbox: verb, tool, the decisive
    fields (amount, payee, target), the matched rule and conditions, the agent. Empty
    strings where the content (not pushed yet) says nothing."""
    content = content or {}
    action = _member_object(content, "action")
    policy = _member_object(content, "policy")
    fields = _member_object(action, "fields")
    decisive: dict[str, str] = {}
    for name, candidates in DECISIVE_FIELDS.items():
        for candidate in candidates:
            if candidate in fields and fields[candidate] not in (None, "", [], {}):
                decisive[name] = _shown(fields[candidate])
                break
    if "target" not in decisive and action.get("target_host"):
        decisive["target"] = _shown(action["target_host"])
    conditions = policy.get("matched_conditions")
    matched = [
        f"{c.get('field')} {c.get('op')} {_shown(c.get('value'))}"
        for c in (conditions if isinstance(conditions, list) else [])
        if isinstance(c, dict)
    ]
    return {
        "verb": str(action.get("verb") or ""),
        "tool": str(action.get("tool_name") or action.get("action") or ""),
        "decisive": decisive,
        "rule_id": str(policy.get("rule_id") or ""),
        "rule_text": str(policy.get("rule_display") or ""),
        "matched": matched,
        "agent": str(content.get("agent_identity") or ""),
        "workflow": str(action.get("workflow") or ""),
    }
