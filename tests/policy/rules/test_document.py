"""policy.md §§1-2: the document and the rule keys, beyond what the vectors cover."""

from __future__ import annotations

import pytest

from apps.policy.rules import Condition, Policy, Rule, Subject, load_policy
from tests.policy.rules.builders import condition, rule


def loaded_policy(toml_text: str) -> Policy:
    loaded = load_policy(toml_text)
    assert loaded.policy is not None, loaded.detail
    return loaded.policy


def loaded_rule(toml_text: str) -> Rule:
    (only,) = loaded_policy(toml_text).rules
    return only


def test_it_reads_every_key_of_a_rule_into_the_model():
    parsed = loaded_rule(
        rule(
            id='"payment.large"',
            order="-40",
            subject='{ kind = "account", value = "acme" }',
            verb='"payment"',
            scope='"*.stripe.com"',
            decision='"require_approval"',
            conditions='[{ field = "amount", op = "gt", value = 1000, display = "> $1,000" }]',
            approvers='["Security Admin", ""]',
            sla_minutes="0",
            client_clearable="true",
        )
    )
    assert parsed == Rule(
        id="payment.large",
        order=-40,
        enabled=True,
        subject=Subject(kind="account", value="acme"),
        verb="payment",
        scope="*.stripe.com",
        decision="require_approval",
        conditions=(Condition(field="amount", op="gt", value=1000, display="> $1,000"),),
        approvers=("Security Admin", ""),
        sla_minutes=0,
        client_clearable=True,
    )


def test_optional_keys_take_their_defaults_and_sla_stays_absent_rather_than_zero():
    parsed = loaded_rule(rule())
    assert parsed.conditions == ()
    assert parsed.approvers == ()
    assert parsed.sla_minutes is None
    assert parsed.client_clearable is False


def test_rules_keep_file_order_and_evaluation_order_sorts_stably_by_order():
    policy = loaded_policy(
        rule(id='"c"', order="5") + rule(id='"a"', order="-1") + rule(id='"b"', order="5")
    )
    assert [r.id for r in policy.rules] == ["c", "a", "b"]
    assert [r.id for r in policy.evaluation_order] == ["a", "c", "b"]


def test_inline_rule_arrays_mean_the_same_as_rule_blocks():
    inline = 'rule = [{ id = "r1", order = 10, enabled = true, subject = { kind = "any" }, '
    inline += 'verb = "llm_call", scope = "*", decision = "allow" }]\n'
    assert loaded_policy(inline) == loaded_policy(rule())


@pytest.mark.parametrize(
    "document", ['rule = "x"\n', '[rule]\nid = "r1"\n', "rule = [1]\n", "rule = [[]]\n"]
)
def test_it_refuses_a_rule_key_that_is_not_an_array_of_tables(document):
    assert load_policy(document).result == "parse_error"


def test_it_ignores_other_top_level_keys_and_tables_with_other_case():
    assert (
        loaded_policy('title = "x"\n[meta]\na = 1\n[[exception]]\n[[Rule]]\nid = 5\n') == Policy()
    )


def test_it_ignores_unknown_rule_keys_whatever_their_type():
    assert loaded_rule(rule(note="1979-05-27", extra="[1, { a = 2 }]")) == loaded_rule(rule())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("id", "1979-05-27"),  # a datetime is never a string
        ("scope", "07:30:00"),
        ("order", "true"),
        ("order", str(-(2**63) - 1)),
        ("enabled", "1"),
        ("verb", '"Delete"'),
        ("verb", "{ delete = {} }"),  # only decision and op take the table spelling
        ("decision", '"ALLOW"'),
        ("sla_minutes", "1.5"),
        ("approvers", '["a", 1979-05-27]'),
        ("client_clearable", '"false"'),
    ],
)
def test_it_refuses_mistyped_or_misspelled_values_without_coercion(key, value):
    assert load_policy(rule(**{key: value})).result == "parse_error"


def test_disabled_rules_are_type_checked_like_enabled_ones():
    assert load_policy(rule(enabled="false", verb='"deny"')).result == "parse_error"


def test_it_accepts_the_extreme_orders_and_sla_minutes():
    assert loaded_rule(rule(order=str(-(2**63)))).order == -(2**63)
    assert loaded_rule(rule(order="0x7fffffffffffffff")).order == 2**63 - 1
    assert loaded_rule(rule(sla_minutes="0xffffffff")).sla_minutes == 2**32 - 1


# -- the table spelling of decision and op (§2.3) -------------------------------------------


@pytest.mark.parametrize(
    ("decision", "expected"),
    [("{ allow = {} }", "allow"), ("{ require_approval = {} }", "require_approval")],
)
def test_it_reads_the_one_key_table_spelling_of_a_decision(decision, expected):
    assert loaded_rule(rule(decision=decision)).decision == expected


def test_it_reads_the_one_key_table_spelling_of_an_operator():
    parsed = loaded_rule(rule(conditions='[{ field = "a", op = { gte = {} }, value = 1 }]'))
    assert parsed.conditions[0].op == "gte"


@pytest.mark.parametrize(
    "decision",
    [
        "{}",
        "{ allow = {}, block = {} }",
        "{ allow = 1 }",
        "{ allow = { x = 1 } }",
        "{ deny = {} }",
        '{ "Allow" = {} }',
    ],
)
def test_it_refuses_any_other_table_spelling(decision):
    assert load_policy(rule(decision=decision)).result == "parse_error"


# -- subject (§2.1) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "subject",
    [
        '{ kind = "any", value = 1 }',  # ignored for any, even non-string
        '{ value = "x", kind = "workflow" }',  # key order is free
        '{ kind = "account", value = "" }',
        '{ kind = "any", extra = [18446744073709551615, { deep = -9223372036854775808 }] }',
    ],
)
def test_it_accepts_these_subjects(subject):
    assert load_policy(rule(subject=subject)).result == "ok"


def test_a_subject_may_be_written_as_a_sub_table_or_dotted_keys():
    sub_table = rule(subject=None) + '[rule.subject]\nkind = "workflow"\nvalue = "w"\n'
    dotted = rule(subject=None, **{"subject.kind": '"workflow"', "subject.value": '"w"'})
    assert loaded_rule(sub_table).subject == loaded_rule(dotted).subject == Subject("workflow", "w")


@pytest.mark.parametrize(
    "subject",
    [
        "{}",
        "{ kind = 1 }",
        '{ kind = "Any" }',
        '{ kind = "account", value = 5 }',
        '{ kind = "any", extra = 18446744073709551616 }',
        '{ kind = "any", extra = [{ deep = -9223372036854775809 }] }',
    ],
)
def test_it_refuses_these_subjects(subject):
    assert load_policy(rule(subject=subject)).result == "parse_error"


# -- conditions (§2.2) ------------------------------------------------------------------------


def test_conditions_may_be_written_as_sub_table_blocks():
    blocks = rule() + '[[rule.conditions]]\nfield = "a"\nop = "eq"\nvalue = "x"\n'
    assert loaded_rule(blocks).conditions == (Condition(field="a", op="eq", value="x"),)


@pytest.mark.parametrize(
    ("value", "json"),
    [
        ('"("', "("),  # matches is not a regular expression
        ("[1, 2.5, true, 'x', [], {}]", [1, 2.5, True, "x", [], {}]),
        ("{ nested = [1, { x = nan }] }", {"nested": [1, {"x": None}]}),
        ("-inf", None),
        ("18446744073709551615", 2**64 - 1),
        ("-9223372036854775808", -(2**63)),
        (
            "1979-05-27T07:32:00.120-05:00",
            {"$__toml_private_datetime": "1979-05-27T07:32:00.12-05:00"},
        ),
        ("1979-05-27", {"$__toml_private_datetime": "1979-05-27"}),
    ],
)
def test_a_condition_value_may_be_any_toml_value_and_is_kept_as_sdk_json(value, json):
    parsed = loaded_rule(rule(conditions=condition(op="matches", value=value)))
    assert parsed.conditions[0].value == json


def test_nothing_about_a_value_is_checked_against_its_operator():
    for op, value in [("in", '"scalar"'), ("matches", "5"), ("gt", "{ a = 1 }")]:
        assert load_policy(rule(conditions=condition(op=op, value=value))).result == "ok"


def test_extra_condition_keys_are_ignored_whatever_the_integer_size():
    extra = (
        '[{ field = "a", op = "eq", value = 1, note = 340282366920938463463374607431768211455 }]'
    )
    assert load_policy(rule(conditions=extra)).result == "ok"


@pytest.mark.parametrize(
    "conditions",
    [
        "[1]",
        '[{ field = 1, op = "eq", value = 1 }]',
        '[{ field = "a", op = "EQ", value = 1 }]',
        '[{ field = "a", op = "eq", value = [18446744073709551616] }]',
        '[{ field = "a", op = "eq", value = { x = -9223372036854775809 } }]',
        '[{ field = "a", op = "eq", value = 1, display = 1979-05-27 }]',
    ],
)
def test_it_refuses_these_conditions(conditions):
    assert load_policy(rule(conditions=conditions)).result == "parse_error"


def test_display_absent_is_none_and_empty_display_stays_empty():
    with_empty = '[{ field = "a", op = "eq", value = 1, display = "" }]'
    assert loaded_rule(rule(conditions=with_empty)).conditions[0].display == ""
    assert loaded_rule(rule(conditions=condition())).conditions[0].display is None


def test_the_error_detail_names_the_place_of_the_problem():
    loaded = load_policy(rule() + rule(conditions='[{ field = "a", op = "like", value = 1 }]'))
    assert loaded.detail is not None
    assert "rule[1].conditions[0].op" in loaded.detail
