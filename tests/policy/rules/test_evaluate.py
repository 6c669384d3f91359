"""policy.md §5: what the SDK decides for an action, beyond what the vectors cover."""

from __future__ import annotations

from typing import Any

import pytest

from apps.policy.rules import (
    DEFAULT_RULE_ID,
    EMPTY_POLICY_TOML,
    FLOOR_DANGEROUS_UNRESOLVED,
    FLOOR_PAYMENT_NO_MANDATE,
    Decision,
    Policy,
    evaluate,
    load_policy,
)
from apps.policy.rules.evaluate import read_number
from tests.policy.rules.builders import condition, rule

RESOLVED_ERT = {"resource_class": "fs_object", "effect": "destroy"}
VALID_MANDATE = {"mandate_id": "m-1", "verdict": "valid"}


def policy_of(toml_text: str) -> Policy:
    loaded = load_policy(toml_text)
    assert loaded.policy is not None, loaded.detail
    return loaded.policy


def action(**members: Any) -> dict[str, Any]:
    """A receipt's content.action: llm_call from workflow wf / account acct unless told."""
    return {
        "verb": "llm_call",
        "tool_name": "t",
        "workflow": "wf",
        "account": "acct",
        "fields": {},
        **members,
    }


def decide(toml_text: str, **members: Any) -> Decision:
    return evaluate(policy_of(toml_text), action(**members))


def matches(op: str, value: str, found: object) -> bool:
    """Whether a one-condition rule on ``fields.x`` matches an action whose x is ``found``."""
    decision = decide(
        rule(conditions=condition(field="x", op=op, value=value)), fields={"x": found}
    )
    return decision.rule_id == "r1"


# -- number reading ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "number"),
    [
        (5, 5.0),
        (2.5, 2.5),
        (2**64 - 1, float(2**64 - 1)),
        ("$1,500.00", 1500.0),
        ("-200", 200.0),
        ("1e3", 13.0),
        ("v2", 2.0),
        ("5.", 5.0),
        (".5", 0.5),
        ("1.2.3", None),
        ("", None),
        ("abc", None),
        (".", None),
        ("١٢", None),  # only ASCII digits count
        (True, None),
        (None, None),
        ([1], None),
        ({"a": 1}, None),
        (10**400, None),
    ],
)
def test_it_reads_numbers_the_way_the_sdk_does(value, number):
    assert read_number(value) == number


# -- operators --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "value", "found", "holds"),
    [
        ("gt", "1000", "$1,000.01", True),
        ("gte", '"1,000"', 1000, True),
        ("lt", "10", "abc", False),
        ("lte", "10", True, False),
        ("lte", "nan", 1, False),  # nan is JSON null: never a number
        ("eq", '"v2"', "release-2", True),  # text is read as a number first
        ("eq", '"a1"', "b1", True),
        ("eq", '"prod"', "prod", True),
        ("eq", '"Prod"', "prod", False),
        ("eq", "true", True, True),
        ("eq", "true", "true", False),
        ("eq", "[1]", [1], False),  # arrays, tables and null never equal
        ("eq", "{}", {}, False),
        ("neq", "1", None, True),  # a present null is neq anything
        ("neq", "1", 1.0, False),
        ("neq", "[1]", [1], True),
        ("in", '["eu", 1]', "eu", True),
        ("in", '["1"]', 1, False),  # the field must be a string
        ("in", '"eu"', "eu", False),  # the value must be an array
        ("not_in", '["eu", 1]', "us", True),
        ("not_in", '["eu"]', "eu", False),
        ("not_in", '["eu"]', 5, False),
        ("not_in", '"eu"', "us", False),
        ("matches", '"STRIPE"', "api.stripe.com", True),
        ("matches", '"a.c"', "abc", False),  # not a regex
        ("matches", '"*"', "abc", False),  # not a glob
        ("matches", "1", "1", False),
        ("exists", "false", 0, True),  # the value is ignored
        ("exists", "true", None, False),
    ],
)
def test_each_operator_holds_exactly_when_the_spec_says(op, value, found, holds):
    assert matches(op, value, found) is holds


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte", "eq", "neq", "in", "not_in", "exists"])
def test_an_absent_field_fails_every_operator(op):
    assert decide(rule(conditions=condition(field="x", op=op, value='["a"]'))).rule_id == (
        DEFAULT_RULE_ID
    )


def test_field_names_are_flat_keys_without_path_syntax():
    toml_text = rule(conditions=condition(field="a.b", op="exists", value="true"))
    assert decide(toml_text, fields={"a": {"b": 1}}).rule_id == DEFAULT_RULE_ID
    assert decide(toml_text, fields={"a.b": 1}).rule_id == "r1"


def test_target_host_and_tool_name_are_not_reachable_from_conditions():
    toml_text = rule(conditions=condition(field="target_host", op="exists", value="true"))
    assert decide(toml_text, target_host="example.com").rule_id == DEFAULT_RULE_ID


def test_mandate_fields_read_the_mandate_object_one_level_deep_never_fields():
    verdict = rule(conditions=condition(field="mandate.verdict", op="eq", value='"valid"'))
    assert decide(verdict, mandate=VALID_MANDATE).rule_id == "r1"
    assert decide(verdict, fields={"mandate.verdict": "valid"}).rule_id == DEFAULT_RULE_ID
    whole = rule(conditions=condition(field="mandate", op="exists", value="true"))
    assert decide(whole, mandate=VALID_MANDATE).rule_id == "r1"
    assert decide(whole, fields={"mandate": 1}).rule_id == DEFAULT_RULE_ID
    deep = rule(conditions=condition(field="mandate.a.b", op="exists", value="true"))
    assert decide(deep, mandate={"a": {"b": 1}}).rule_id == DEFAULT_RULE_ID
    assert decide(deep, mandate={"a.b": 1}).rule_id == "r1"


def test_all_conditions_must_hold():
    both = '[{ field = "a", op = "exists", value = 1 }, { field = "b", op = "exists", value = 1 }]'
    assert decide(rule(conditions=both), fields={"a": 1}).rule_id == DEFAULT_RULE_ID
    assert decide(rule(conditions=both), fields={"a": 1, "b": 2}).rule_id == "r1"


# -- verb, subject, scope ---------------------------------------------------------------------


def test_verb_any_matches_every_verb_and_others_match_exactly():
    assert decide(rule(verb='"any"', decision='"block"'), verb="delete").rule_id == "r1"
    assert decide(rule(verb='"tool_call"'), verb="llm_call").rule_id == DEFAULT_RULE_ID


def test_an_account_subject_compares_the_action_account_exactly():
    toml_text = rule(subject='{ kind = "account", value = "acct" }')
    assert decide(toml_text).rule_id == "r1"
    assert decide(toml_text, account="Acct").rule_id == DEFAULT_RULE_ID


@pytest.mark.parametrize(
    ("scope", "host", "hit"),
    [
        ("*", None, True),
        ("", None, True),
        ("", "anything", True),
        ("example.com", "example.com", True),
        ("example.com", "api.example.com", True),
        ("*.example.com", "api.example.com", True),
        ("example.com", "badexample.com", False),
        ("*.example.com", "badexample.com", False),
        ("example.com", "Example.com", False),
        ("*example.com", "example.com", False),
        (".example.com", "example.com", False),
        ("*.*", "a.b", False),
        ("example.com", None, False),
    ],
)
def test_scope_matches_the_host_or_its_subdomains(scope, host, hit):
    host_member = {} if host is None else {"target_host": host}
    assert (decide(rule(scope=f'"{scope}"'), **host_member).rule_id == "r1") is hit


# -- run-time floors --------------------------------------------------------------------------


DELETE_ALLOW = rule(verb='"delete"', conditions=condition(field="p", op="exists", value="1"))
ANY_ALLOW = rule(verb='"any"', conditions=condition(field="p", op="exists", value="1"))


def test_a_redact_on_an_unresolved_dangerous_action_routes_to_a_human():
    toml_text = rule(verb='"account_change"', decision='"redact"')
    decision = decide(toml_text, verb="account_change")
    assert (decision.decision_path, decision.rule_id) == (
        "require_approval",
        FLOOR_DANGEROUS_UNRESOLVED,
    )
    assert decision.rule is not None
    assert decision.rule.id == "r1"


def test_an_explicitly_unresolved_classification_also_routes_to_a_human():
    ert = {**RESOLVED_ERT, "resource_class": "unresolved"}
    assert decide(DELETE_ALLOW, verb="delete", fields={"p": 1}, ert=ert).rule_id == (
        FLOOR_DANGEROUS_UNRESOLVED
    )


@pytest.mark.parametrize("effect", ["destroy", "transfer_out", "spend", "grant"])
def test_a_dangerous_effect_makes_any_verb_dangerous(effect):
    ert = {"resource_class": "unresolved", "effect": effect}
    decision = decide(ANY_ALLOW, verb="tool_call", fields={"p": 1}, ert=ert)
    assert decision.rule_id == FLOOR_DANGEROUS_UNRESOLVED


def test_a_safe_action_without_classification_keeps_its_allow():
    assert decide(ANY_ALLOW, verb="tool_call", fields={"p": 1}).decision_path == "allow"


def test_a_spend_effect_needs_a_valid_mandate_whatever_the_verb():
    ert = {"resource_class": "api", "effect": "spend"}
    without = decide(ANY_ALLOW, verb="tool_call", fields={"p": 1}, ert=ert)
    assert without.rule_id == FLOOR_PAYMENT_NO_MANDATE
    invalid = decide(
        ANY_ALLOW, verb="tool_call", fields={"p": 1}, ert=ert, mandate={"verdict": "invalid"}
    )
    assert invalid.rule_id == FLOOR_PAYMENT_NO_MANDATE
    valid = decide(ANY_ALLOW, verb="tool_call", fields={"p": 1}, ert=ert, mandate=VALID_MANDATE)
    assert (valid.decision_path, valid.rule_id) == ("allow", "r1")


def test_a_resolved_dangerous_allow_stands():
    decision = decide(DELETE_ALLOW, verb="delete", fields={"p": 1}, ert=RESOLVED_ERT)
    assert (decision.decision_path, decision.rule_id) == ("allow", "r1")


@pytest.mark.parametrize("decision", ['"block"', '"require_approval"'])
def test_block_and_require_approval_are_never_rewritten(decision):
    toml_text = rule(verb='"payment"', decision=decision)
    assert decide(toml_text, verb="payment").rule_id == "r1"


# -- defaults and the decision ----------------------------------------------------------------


def test_the_empty_policy_routes_every_action_to_a_human():
    policy = policy_of(EMPTY_POLICY_TOML)
    for verb in ["llm_call", "tool_call", "http_request", "payment", "delete"]:
        assert evaluate(policy, action(verb=verb)) == Decision(
            decision_path="require_approval", rule_id=DEFAULT_RULE_ID
        )


def test_the_decision_carries_the_matched_rule_and_its_conditions():
    toml_text = rule(conditions=condition(field="n", op="gt", value="1"))
    decision = decide(toml_text, fields={"n": 2})
    assert decision.rule is not None
    assert decision.matched_conditions == decision.rule.conditions
    assert decision.matched_conditions[0].field == "n"
    assert decide(toml_text).matched_conditions == ()


@pytest.mark.parametrize(
    "broken",
    [
        {"fields": None},
        {"fields": [1]},
        {"verb": ["delete"]},
        {"target_host": 5},
        {"ert": "x"},
        {"ert": {"effect": ["spend"]}},
        {"mandate": "valid"},
    ],
)
def test_evaluation_never_raises_on_oddly_shaped_actions(broken):
    toml_text = (
        rule(scope='"example.com"', conditions=condition(field="mandate.v", op="eq", value="1"))
        + ANY_ALLOW
    )
    assert isinstance(decide(toml_text, **broken), Decision)
