"""Policy preview: replay recently mirrored actions through a draft policy, deploying nothing.

Each mirrored action receipt carries the action the SDK gated (``content.action``) and the
decision it took (``content.policy``). Evaluating the same action under the draft shows
which decisions a deploy would change. The SDK evaluates locally; this is the service's
reading of policy.md §5, good for a preview, never for enforcement.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone

from apps.common.stored_json import stored_value
from apps.policy.rules import Policy, evaluate
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import RETIRED_BODY
from apps.tenancy.models import Org

SAMPLE_SIZE = 20


@dataclass(frozen=True)
class DecisionChange:
    seq: int
    action_hash: str
    verb: str
    workflow: str
    before_decision: str
    before_rule_id: str
    after_decision: str
    after_rule_id: str


@dataclass
class PreviewReport:
    days: int
    considered: int = 0
    unchanged: int = 0
    changed: int = 0
    rule_only_changed: int = 0  # same decision, reached through another rule
    truncated: bool = False  # more receipts in the window than the replay limit
    transitions: Counter[str] = field(default_factory=Counter)  # "allow -> block": n
    sample: list[DecisionChange] = field(default_factory=list)


def policy_preview(*, org: Org, draft: Policy, days: int, limit: int) -> PreviewReport:
    """Evaluate the org's action receipts of the last ``days`` days (newest ``limit`` of
    them) under ``draft`` and count the decisions that would change.

    Superseded entries are skipped: the superseding entry is the same action, counted once;
    so are entries whose body is retired (past the org's retention, archived): there is no
    action left to evaluate.
    """
    report = PreviewReport(days=days)
    since = timezone.now() - timedelta(days=days)
    rows = (
        MirrorEntry.objects.filter(org=org, received_at__gte=since, kind="action", superseded_by="")
        .exclude(receipt=RETIRED_BODY)
        .order_by("-seq")
        .values_list("seq", "action_hash", "receipt")[: limit + 1]
    )
    for index, (seq, action_hash, receipt_text) in enumerate(rows.iterator(chunk_size=500)):
        if index == limit:
            report.truncated = True
            break
        content: dict[str, Any] = stored_value(receipt_text)["content"]
        action = content.get("action")
        before = content.get("policy")
        if not isinstance(action, dict) or not isinstance(before, dict):
            continue
        after = evaluate(draft, action)
        report.considered += 1
        if after.decision_path == before["decision_path"]:
            report.unchanged += 1
            if after.rule_id != before["rule_id"]:
                report.rule_only_changed += 1
            continue
        report.changed += 1
        report.transitions[f"{before['decision_path']} -> {after.decision_path}"] += 1
        if len(report.sample) < SAMPLE_SIZE:
            report.sample.append(
                DecisionChange(
                    seq=seq,
                    action_hash=action_hash,
                    verb=str(action.get("verb", "")),
                    workflow=str(action.get("workflow", "")),
                    before_decision=before["decision_path"],
                    before_rule_id=before["rule_id"],
                    after_decision=after.decision_path,
                    after_rule_id=after.rule_id,
                )
            )
    return report
