"""Suspended content and suspend tickets: what an approval is about, how a request's hash
finds it, and the content-less approval a ticket opened (server.md §6)."""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone

from apps.approvals.content import parse_signed_time, signed_approval_block, ticket_hash
from apps.approvals.models import (
    Approval,
)
from apps.approvals.selectors import mirrored_content
from apps.approvals.services.history import approval_event
from apps.common.stored_json import stored_text
from apps.receipts.columns import indexed_text
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import Org

HEX64 = re.compile(r"[0-9a-f]{64}")


def producer_keys_of(approval: Approval, content: dict[str, Any]) -> set[str]:
    """Keys that produced the suspended receipt: its ``agent_identity`` and the operator
    signatures of the mirrored receipt. None of them may approve it."""
    keys = {str(content.get("agent_identity", "")), *approval.producer_keys}
    keys.update(
        MirrorEntry.objects.filter(org_id=approval.org_id, action_hash=approval.action_hash)
        .exclude(operator_key="")
        .values_list("operator_key", flat=True)
    )
    keys.discard("")
    return keys


def suspended_policy_hash(content: dict[str, Any]) -> str:
    """The hash of the policy a suspended content says it was decided under (its signed
    ``suspension.policy.policy_hash``), when it is one (64 lowercase hex); "" otherwise."""
    suspension = content.get("suspension")
    policy = suspension.get("policy") if isinstance(suspension, dict) else None
    value = policy.get("policy_hash") if isinstance(policy, dict) else None
    return value if isinstance(value, str) and HEX64.fullmatch(value) else ""


def adopt_content(approval: Approval, content: dict[str, Any]) -> list[str]:
    """Give a content-less approval its suspended content (and so its ticket, its rule and
    its signed expiry, where the opener gave none); the fields changed."""
    approval.suspended_content = stored_text(content)
    approval.ticket_hash = ticket_hash(content)
    changed = ["suspended_content", "ticket_hash"]
    session_id, seq = content.get("session_id"), content.get("seq")
    if isinstance(session_id, str) and session_id and isinstance(seq, int):
        approval.session_id = indexed_text(session_id)
        approval.session_seq = seq
        changed += ["session_id", "session_seq"]
    decided_under = suspended_policy_hash(content)
    if decided_under:
        approval.policy_hash = decided_under
        changed.append("policy_hash")
    policy = content.get("policy")
    if not approval.rule_id and isinstance(policy, dict) and policy.get("rule_id"):
        approval.rule_id = str(policy["rule_id"])[:200]
        changed.append("rule_id")
    action = content.get("action")
    if isinstance(action, dict):
        if not approval.workflow and action.get("workflow"):
            approval.workflow = str(action["workflow"])[:200]
            changed.append("workflow")
        if not approval.account and action.get("account"):
            approval.account = str(action["account"])[:200]
            changed.append("account")
    timing = signed_approval_block(content)
    if approval.expires_at is None and parse_signed_time(timing.get("expires_at")):
        approval.expires_at = parse_signed_time(timing.get("expires_at"))
        changed.append("expires_at")
    if not approval.on_timeout and timing.get("on_timeout"):
        approval.on_timeout = str(timing["on_timeout"])[:16]
        changed.append("on_timeout")
    return changed


def merge_ticket_opened(org: Org, content: dict[str, Any]) -> None:
    """When a suspended content arrives: an approval opened by its ticket before any content
    (heso-mcp opens and never pushes) becomes the content's approval, keeping its id. If
    the content's own approval exists too, the ticket-opened one (content-less, so never
    voted on) folds into it."""
    action_hash = content["action_hash"]
    ticket = ticket_hash(content)
    if ticket == action_hash:  # an empty agent_identity: the ticket is the content hash
        return
    orphan = (
        Approval.objects.select_for_update()
        .filter(org=org, action_hash=ticket, suspended_content="")
        .first()
    )
    if orphan is None:
        return
    now = timezone.now()
    keyed = Approval.objects.select_for_update().filter(org=org, action_hash=action_hash).first()
    if keyed is None:
        orphan.action_hash = action_hash
        changed = adopt_content(orphan, content)
        orphan.save(update_fields=["action_hash", *changed])
        approval_event(orphan, "content_arrived", now, action_hash=action_hash, ticket=ticket)
        return
    approval_event(keyed, "merged", now, approval_id=orphan.approval_id, ticket=ticket)
    orphan.delete()


def known_content(org: Org, action_hash: str, given: dict[str, Any] | None) -> dict[str, Any]:
    content = given or mirrored_content(org=org, action_hash=action_hash) or {}
    return content if content.get("action_hash") == action_hash else {}
