"""The team-path JSON of a policy's rules (policy.md §8, a proposal of ours).

``GET /v1/teams/{teamId}/policy`` serves ``PolicyBundle.rules``: every rule (disabled ones
too, with ``enabled: false``) in evaluation order, so a client can run first match over the
list, skip disabled rules, then apply the §5 defaults and floors itself. Each rule is
camelCase with every key present; ``decision`` and ``op`` are always plain strings, ignored
keys are dropped, and condition values are the JSON the SDK works with (already converted at
load time by :mod:`apps.policy.rules.json_values`).

``order`` is rendered as a JSON integer even beyond 2**53 (policy.md §9 question 3).
"""

from __future__ import annotations

import copy

from apps.policy.rules.model import Condition, JsonValue, Policy, Rule, Subject


def render_policy_json(policy: Policy) -> list[dict[str, JsonValue]]:
    """``PolicyBundle.rules``: one fresh JSON object per rule, in evaluation order."""
    return [render_rule(rule) for rule in policy.evaluation_order]


def render_rule(rule: Rule) -> dict[str, JsonValue]:
    """One ``PolicyRule``."""
    conditions: list[JsonValue] = [_condition(condition) for condition in rule.conditions]
    approvers: list[JsonValue] = list(rule.approvers)
    return {
        "id": rule.id,
        "order": rule.order,
        "enabled": rule.enabled,
        "subject": _subject(rule.subject),
        "verb": rule.verb,
        "scope": rule.scope,
        "decision": rule.decision,
        "conditions": conditions,
        "approvers": approvers,
        "slaMinutes": rule.sla_minutes,
        "clientClearable": rule.client_clearable,
    }


def _subject(subject: Subject) -> dict[str, JsonValue]:
    if subject.value is None:
        return {"kind": subject.kind}
    return {"kind": subject.kind, "value": subject.value}


def _condition(condition: Condition) -> dict[str, JsonValue]:
    return {
        "field": condition.field,
        "op": condition.op,
        "value": copy.deepcopy(condition.value),  # callers may mutate what they get
        "display": condition.display,
    }
