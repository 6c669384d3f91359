"""Console: the mirrored receipts, read-only, readable, and re-verifiable on demand."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from apps.receipts.mirror_chain import chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_receipt
from apps.tenancy.admin_access import OrgScopedAdmin


def reverify(entry: MirrorEntry) -> str:
    """The stored receipt's verdict now, and whether its digest and chain link still hold."""
    verdict = verify_receipt(entry.receipt)
    problems = []
    if receipt_digest(entry.receipt) != entry.receipt_digest:
        problems.append("receipt_digest does not match the stored text")
    recomputed = chain_hash(
        prev_chain_hash=entry.prev_chain_hash,
        seq=entry.seq,
        action_hash=entry.action_hash,
        receipt_digest_hex=receipt_digest(entry.receipt),
        supersedes_action_hash=entry.supersedes_action_hash,
    )
    if recomputed != entry.chain_hash:
        problems.append("chain_hash does not recompute")
    level = f" ({verdict.trust_level})" if verdict.trust_level else ""
    detail = f": {verdict.detail}" if verdict.detail else ""
    link = "; ".join(problems) if problems else "digest and chain link hold"
    return f"#{entry.seq}: {verdict.kind}{level}{detail}; {link}"


DETAIL_FIELDS = ("readable", "org", "seq", "action_hash", "kind", "trust_level",
                 "supersedes_action_hash", "superseded_by", "prev_chain_hash", "chain_hash",
                 "receipt_digest", "received_at", "api_key", "session_id", "session_seq",
                 "verdict_now", "receipt")  # fmt: skip


@admin.register(MirrorEntry)
class MirrorEntryAdmin(OrgScopedAdmin[MirrorEntry]):
    list_display = ["seq", "org", "action_hash", "kind", "trust_level", "verb", "workflow",
                    "decision_path", "agent_identity", "superseded_by", "received_at"]  # fmt: skip
    list_filter = ["org", "trust_level", "kind", "decision_path", "verb", "received_at"]
    search_fields = ["=action_hash", "agent_identity", "workflow", "rule_id", "session_id"]
    date_hierarchy = "received_at"
    ordering = ["org", "-seq"]
    actions = ["reverify_selected"]
    list_per_page = 50
    fields = DETAIL_FIELDS
    readonly_fields = DETAIL_FIELDS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: MirrorEntry | None = None) -> bool:
        return False

    @admin.display(description="Receipt")
    def readable(self, obj: MirrorEntry) -> str:
        content: dict[str, Any] = json.loads(obj.receipt)["content"]
        action = content.get("action") or {}
        policy = content.get("policy") or {}
        decision = content.get("approver_decision") or {}
        quorum = content.get("multi_approval") or {}
        rows = [
            (
                "Action",
                f"{action.get('verb', '')} {action.get('tool_name', '')} "
                f"{action.get('target_host', '')}".strip(),
            ),
            ("Workflow / account", f"{action.get('workflow', '')} / {action.get('account', '')}"),
            ("Fields", json.dumps(action.get("fields", {}), ensure_ascii=False, indent=1)),
            ("Policy", f"{policy.get('decision_path', '')} by rule {policy.get('rule_id', '')}"),
            ("Operator", content.get("agent_identity", "")),
            ("Captured at", content.get("captured_at", "")),
            (
                "Approval",
                json.dumps(decision or quorum, ensure_ascii=False)
                if decision or quorum
                else "none",
            ),
            (
                "Signatures",
                ", ".join(
                    f"{sig.get('key_id')} {sig.get('public_key', '')[:12]}…"
                    for sig in json.loads(obj.receipt).get("signatures", [])
                ),
            ),
            ("Chain position", f"seq {obj.seq}; superseded by {obj.superseded_by or 'nothing'}"),
        ]
        return format_html(
            "<table>{}</table>",
            format_html_join(
                "", "<tr><th>{}</th><td><pre style='margin:0'>{}</pre></td></tr>", rows
            ),
        )

    @admin.display(description="Verdict now (re-verified on this page)")
    def verdict_now(self, obj: MirrorEntry) -> str:
        return reverify(obj)

    @admin.action(description="Re-verify selected receipts")
    def reverify_selected(self, request: HttpRequest, queryset: QuerySet[MirrorEntry]) -> None:
        for entry in queryset.order_by("seq")[:200]:
            verdict = reverify(entry)
            level = (
                messages.SUCCESS if ": Valid" in verdict and "hold" in verdict else messages.ERROR
            )
            self.message_user(request, verdict, level)
