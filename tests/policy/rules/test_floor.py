"""policy.md §4: the dangerous-lane floor checked at load time."""

from __future__ import annotations

import pytest

from apps.policy.rules import load_policy
from tests.policy.rules.builders import condition, rule

NARROWING_VERBS = ["data_export", "account_change", "delete", "any"]


def outcome(toml_text: str) -> str:
    return load_policy(toml_text).result


@pytest.mark.parametrize("verb", ["payment", *NARROWING_VERBS])
def test_it_refuses_a_rule_that_allows_a_dangerous_verb_without_approval(verb):
    loaded = load_policy(rule(id='"open"', verb=f'"{verb}"'))
    assert loaded.result == "floor_bypass"
    assert loaded.rule_id == "open"
    assert loaded.detail is not None
    assert "'open'" in loaded.detail
    assert verb in loaded.detail


def test_it_refuses_a_rule_that_allows_delete_without_approval():
    assert outcome(rule(verb='"delete"')) == "floor_bypass"


def test_it_treats_data_export_as_dangerous_even_though_the_sdk_does_not_call_it_destructive():
    assert outcome(rule(verb='"data_export"')) == "floor_bypass"


@pytest.mark.parametrize("verb", ["llm_call", "tool_call", "http_request"])
def test_it_never_polices_the_safe_verbs(verb):
    assert outcome(rule(verb=f'"{verb}"')) == "ok"


@pytest.mark.parametrize("decision", ['"block"', '"redact"', '"require_approval"'])
@pytest.mark.parametrize("verb", ["payment", *NARROWING_VERBS])
def test_it_only_polices_allow(decision, verb):
    assert outcome(rule(verb=f'"{verb}"', decision=decision)) == "ok"


def test_it_polices_the_table_spelling_of_allow():
    assert outcome(rule(verb='"delete"', decision="{ allow = {} }")) == "floor_bypass"


def test_it_never_polices_a_disabled_rule():
    assert outcome(rule(verb='"payment"', enabled="false")) == "ok"


# -- payment: only a mandate condition narrows it -------------------------------------------


@pytest.mark.parametrize("field", ["mandate", "mandate.verdict", "mandate.", "mandate.a.b"])
def test_it_accepts_a_payment_allow_that_tests_the_mandate_with_any_operator(field):
    conditions = condition(field=field, op="exists", value="false")
    assert outcome(rule(verb='"payment"', conditions=conditions)) == "ok"


def test_a_mandate_condition_anywhere_in_the_list_is_enough():
    conditions = (
        '[{ field = "amount", op = "lt", value = 5 }, '
        '{ field = "mandate.verdict", op = "neq", value = "invalid" }]'
    )
    assert outcome(rule(verb='"payment"', conditions=conditions)) == "ok"


@pytest.mark.parametrize(
    "narrowing",
    [
        {"conditions": condition(field="amount", op="lt", value="100")},
        {"conditions": condition(field="Mandate.verdict", op="eq", value='"valid"')},
        {"conditions": condition(field="mandates", op="exists", value="true")},
        {"conditions": condition(field="fields.mandate", op="exists", value="true")},
        {"subject": '{ kind = "workflow", value = "billing" }'},
        {"scope": '"api.stripe.com"'},
        {"client_clearable": "true"},
    ],
)
def test_it_refuses_a_payment_allow_narrowed_by_anything_but_the_mandate(narrowing):
    assert outcome(rule(verb='"payment"', **narrowing)) == "floor_bypass"


# -- the other dangerous verbs and `any`: any condition or a narrowed subject will do -------


@pytest.mark.parametrize("verb", NARROWING_VERBS)
@pytest.mark.parametrize(
    "narrowing",
    [
        {"conditions": condition(field="env", op="exists", value="true")},
        {"conditions": condition(field="", op="neq", value="[]")},  # even trivially true
        {"subject": '{ kind = "workflow", value = "cleanup" }'},
        {"subject": '{ kind = "account", value = "" }'},  # even an empty value
    ],
)
def test_it_accepts_an_allow_narrowed_by_a_condition_or_subject(verb, narrowing):
    assert outcome(rule(verb=f'"{verb}"', **narrowing)) == "ok"


@pytest.mark.parametrize("verb", NARROWING_VERBS)
def test_scope_does_not_narrow_an_allow(verb):
    assert outcome(rule(verb=f'"{verb}"', scope='"internal.example.com"')) == "floor_bypass"


def test_an_empty_conditions_array_does_not_narrow_an_allow():
    assert outcome(rule(verb='"delete"', conditions="[]")) == "floor_bypass"


# -- the whole file ----------------------------------------------------------------------------


def test_it_reports_the_first_offender_in_file_order_not_in_evaluation_order():
    policy = rule(id='"late"', order="99", verb='"delete"') + rule(
        id='"early"', order="1", verb='"payment"'
    )
    assert load_policy(policy).rule_id == "late"


def test_an_earlier_gate_does_not_excuse_a_later_allow():
    policy = rule(id='"gate"', verb='"delete"', decision='"block"') + rule(
        id='"open"', order="20", verb='"delete"'
    )
    assert load_policy(policy).rule_id == "open"


def test_a_file_with_no_rule_for_a_dangerous_lane_is_fine():
    assert outcome(rule(verb='"llm_call"') + rule(verb='"tool_call"')) == "ok"


def test_duplicate_ids_and_orders_are_never_errors():
    assert outcome(rule() + rule()) == "ok"


def test_a_parse_error_wins_over_a_floor_bypass_later_or_earlier_in_the_file():
    assert outcome(rule(verb='"delete"') + rule(verb='"nope"')) == "parse_error"
    assert outcome(rule(verb='"nope"') + rule(verb='"delete"')) == "parse_error"
