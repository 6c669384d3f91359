"""policy.md §8: the team-path JSON of a policy's rules."""

from __future__ import annotations

import json
from typing import Any

from apps.policy.rules import Policy, load_policy, render_policy_json
from tests.policy.rules.builders import rule

STARTER_PAYMENT_RULE = rule(
    id='"payment.large.requires_approval"',
    order="40",
    verb='"payment"',
    decision='"require_approval"',
    conditions='[{ field = "amount", op = "gt", value = 1000, display = "amount > $1,000" }]',
    approvers='["Security Admin"]',
    sla_minutes="30",
)


def rendered(toml_text: str) -> list[dict[str, object]]:
    loaded = load_policy(toml_text)
    assert loaded.policy is not None, loaded.detail
    rules: list[Any] = render_policy_json(loaded.policy)
    return rules


def test_it_renders_the_documented_example_exactly():
    assert rendered(STARTER_PAYMENT_RULE) == [
        {
            "id": "payment.large.requires_approval",
            "order": 40,
            "enabled": True,
            "subject": {"kind": "any"},
            "verb": "payment",
            "scope": "*",
            "decision": "require_approval",
            "conditions": [
                {"field": "amount", "op": "gt", "value": 1000, "display": "amount > $1,000"}
            ],
            "approvers": ["Security Admin"],
            "slaMinutes": 30,
            "clientClearable": False,
        }
    ]


def test_absent_optional_keys_render_as_their_defaults_with_every_key_present():
    (only,) = rendered(rule())
    assert only["conditions"] == []
    assert only["approvers"] == []
    assert only["slaMinutes"] is None
    assert only["clientClearable"] is False
    assert list(only) == [
        "id",
        "order",
        "enabled",
        "subject",
        "verb",
        "scope",
        "decision",
        "conditions",
        "approvers",
        "slaMinutes",
        "clientClearable",
    ]


def test_rules_come_in_evaluation_order_with_disabled_ones_kept():
    toml_text = (
        rule(id='"b"', order="5")
        + rule(id='"off"', order="1", enabled="false")
        + rule(id='"c"', order="5")
    )
    assert [(r["id"], r["enabled"]) for r in rendered(toml_text)] == [
        ("off", False),
        ("b", True),
        ("c", True),
    ]


def test_table_spellings_render_as_plain_strings_and_ignored_keys_are_dropped():
    (only,) = rendered(
        rule(
            decision="{ block = {} }",
            subject='{ kind = "workflow", value = "w", note = 1 }',
            conditions='[{ field = "a", op = { neq = {} }, value = 1, note = "x" }]',
            unknown='"dropped"',
        )
    )
    assert only["decision"] == "block"
    assert only["subject"] == {"kind": "workflow", "value": "w"}
    assert only["conditions"] == [{"field": "a", "op": "neq", "value": 1, "display": None}]
    assert "unknown" not in only


def test_condition_values_render_as_the_sdk_json_and_serialise():
    (only,) = rendered(
        rule(
            conditions='[{ field = "a", op = "in", value = [1, 1.5, nan, "x", '
            "{ at = 1979-05-27T00:32:00.999999-07:00 }, 00:32:00] }]"
        )
    )
    value: list[object] = [
        1,
        1.5,
        None,
        "x",
        {"at": {"$__toml_private_datetime": "1979-05-27T00:32:00.999999-07:00"}},
        {"$__toml_private_datetime": "00:32:00"},
    ]
    assert only["conditions"] == [{"field": "a", "op": "in", "value": value, "display": None}]
    json.dumps(only, allow_nan=False)


def test_large_orders_stay_integers():
    (only,) = rendered(rule(order=str(2**63 - 1)))
    assert only["order"] == 2**63 - 1


def test_the_rendering_is_a_fresh_copy_the_caller_may_change():
    loaded = load_policy(rule(conditions='[{ field = "a", op = "in", value = ["x"] }]'))
    assert loaded.policy is not None
    first: Any = render_policy_json(loaded.policy)
    first[0]["conditions"][0]["value"].append("y")
    assert render_policy_json(loaded.policy) != first


def test_the_empty_policy_renders_no_rules():
    assert render_policy_json(Policy()) == []
