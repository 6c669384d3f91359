"""policy.md §3: the TOML 1.1 dialect the SDK reads, and the limits it enforces."""

from __future__ import annotations

from typing import Any

import pytest
import tomli
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.policy.rules import load_policy, render_policy_json
from apps.policy.rules.toml_dialect import prepare
from tests.policy.rules.builders import condition, rule


def loads(toml_text: str) -> str:
    return load_policy(toml_text).result


def nested_arrays(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def nested_inline_tables(depth: int) -> str:
    return "{ a = " * depth + "1" + " }" * depth


def dotted_key(parts: int) -> str:
    return ".".join(f"k{index}" for index in range(parts))


# -- nesting ------------------------------------------------------------------------------


@pytest.mark.parametrize("nest", [nested_arrays, nested_inline_tables])
def test_a_value_may_nest_eighty_containers_but_not_eighty_one(nest):
    assert loads(f"x = {nest(80)}\n") == "ok"
    assert loads(f"x = {nest(81)}\n") == "parse_error"


def test_the_conditions_array_and_each_condition_table_count_towards_the_nesting_limit():
    # conditions array (1) + condition table (2) + 78 arrays = 80
    assert loads(rule(conditions=condition(value=nested_arrays(78)))) == "ok"
    assert loads(rule(conditions=condition(value=nested_arrays(79)))) == "parse_error"


def test_the_nesting_limit_applies_under_ignored_keys_too():
    assert loads(rule(note=nested_arrays(81))) == "parse_error"


def test_the_nesting_limit_is_per_value_not_per_document():
    assert loads(f"a = {nested_arrays(80)}\nb = {nested_arrays(80)}\n") == "ok"


def test_very_deep_nesting_is_a_parse_error_not_a_crash():
    assert loads(f"x = {nested_arrays(100_000)}\n") == "parse_error"
    assert loads("x = " + "[" * 100_000) == "parse_error"


# -- key length ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template", ["{key} = 1\n", "[{key}]\n", "[[{key}]]\n", "x = {{ {key} = 1 }}\n"]
)
def test_a_key_may_have_eighty_parts_but_not_eighty_one(template):
    assert loads(template.format(key=dotted_key(80))) == "ok"
    assert loads(template.format(key=dotted_key(81))) == "parse_error"


def test_quoted_parts_and_blanks_around_dots_count_as_parts_too():
    key = " . ".join(['"a.b"', "'c'", *(f"k{index}" for index in range(79))])
    assert loads(f"{key} = 1\n") == "parse_error"


# -- integers and floats ------------------------------------------------------------------


@pytest.mark.parametrize(
    "literal",
    [str(2**128 - 1), str(-(2**127)), "0x" + "f" * 32, "0o" + "7" * 42, "0b" + "1" * 128],
)
def test_integer_literals_up_to_128_bits_load_under_ignored_keys(literal):
    assert loads(rule(note=literal)) == "ok"


@pytest.mark.parametrize(
    "literal", [str(2**128), str(-(2**127) - 1), "0x1" + "0" * 32, "1" + "0" * 5000]
)
def test_integer_literals_beyond_128_bits_are_refused_anywhere(literal):
    assert loads(rule(note=literal)) == "parse_error"
    assert loads(f"title = {literal}\n") == "parse_error"


@pytest.mark.parametrize("literal", ["1e400", "1.8e308", "-1e400", "1_0e400"])
def test_a_float_literal_that_overflows_to_infinity_is_refused_anywhere(literal):
    assert loads(f"title = {literal}\n") == "parse_error"


@pytest.mark.parametrize("literal", ["inf", "+inf", "-inf", "nan", "+nan", "-nan", "1e-400"])
def test_literal_infinities_nans_and_underflow_are_fine(literal):
    assert loads(rule(conditions=condition(value=literal))) == "ok"


# -- the TOML 1.1 features the SDK accepts ----------------------------------------------------


@pytest.mark.parametrize(
    "subject",
    [
        '{\n  kind = "any",\n}',
        '{ # the subject\n  kind = "any" # every agent\n}',
        '{ kind\n  = "any" }',
        '{ kind = # every agent\n  "any" }',
        '{ kind # what kind\n  = "any" }',
    ],
)
def test_inline_tables_may_span_lines_with_comments_and_a_trailing_comma(subject):
    assert loads(rule(subject=subject)) == "ok"


@pytest.mark.parametrize(
    "value",
    [
        "{ a.\nb = 1 }",  # a break inside a dotted key
        "{ a\n.b = 1 }",
        "{ a = 1\nb = 2 }",  # a break is not a comma
        "{ , }",
        "{ a = 1,, }",
        "1979-05-27\n07:32:00",  # a break is not the date/time separator
        "{ a = 1 # \x01\n}",  # a comment with a control character
    ],
)
def test_line_breaks_stay_errors_where_the_sdk_refuses_them(value):
    assert loads(f"x = {value}\n") == "parse_error"


@pytest.mark.parametrize(
    ("escaped", "text"),
    [(r"r\e1", "r\x1b1"), (r"r\x41", "rA"), (r"r\u00e9", "ré")],
)
def test_basic_strings_accept_the_e_and_x_escapes(escaped, text):
    loaded = load_policy(rule(id=f'"{escaped}"'))
    assert loaded.policy is not None
    assert loaded.policy.rules[0].id == text


def test_a_hex_escape_needs_exactly_two_digits():
    assert loads(rule(id=r'"r\x4"')) == "parse_error"


@pytest.mark.parametrize(
    ("literal", "text"),
    [
        ("07:32", "07:32:00"),
        ("1979-05-27T07:32Z", "1979-05-27T07:32:00Z"),
        ("1979-05-27 07:32", "1979-05-27T07:32:00"),
        ("23:59:60", "23:59:59"),  # validation-only substitution shows through (§9 q2)
        ("1979-05-27T07:32:60.5+05:30", "1979-05-27T07:32:59.5+05:30"),
        ("0000-02-29", "2000-02-29"),  # year 0000 is a leap year
    ],
)
def test_times_without_seconds_second_sixty_and_year_zero_load(literal, text):
    loaded = load_policy(rule(conditions=condition(value=literal)))
    assert loaded.policy is not None, loaded.detail
    conditions: Any = render_policy_json(loaded.policy)[0]["conditions"]
    assert conditions[0]["value"] == {"$__toml_private_datetime": text}


@pytest.mark.parametrize("literal", ["07:32.5", "0001-02-29", "07:60:00", "24:00:00"])
def test_other_impossible_times_stay_errors(literal):
    assert loads(rule(conditions=condition(value=literal))) == "parse_error"


def test_the_shim_never_rewrites_inside_strings():
    assert loads('x = { a = "{ b\n= 1 }" }\n') == "parse_error"  # a break in a one-line string
    loaded = load_policy(
        rule(subject='{ kind = "workflow", value = """\n23:59:60 0000-01-01 { b\n= 1 }""" }')
    )
    assert loaded.policy is not None
    assert loaded.policy.rules[0].subject.value == "23:59:60 0000-01-01 { b\n= 1 }"


def test_one_leading_byte_order_mark_is_dropped():
    assert loads("\ufeff" + rule()) == "ok"
    assert loads("\ufeff\ufeff" + rule()) == "parse_error"
    assert loads(rule() + "\ufeff") == "parse_error"


# -- text the SDK could never have read -------------------------------------------------------


def test_a_lone_surrogate_is_refused():
    assert loads(rule(id='"\ud800"')) == "parse_error"


def test_crlf_line_endings_load_and_a_lone_carriage_return_does_not():
    assert loads(rule().replace("\n", "\r\n")) == "ok"
    assert loads(rule().replace("\n", "\r")) == "parse_error"


# -- the shim follows all valid TOML ---------------------------------------------------------

keys = st.from_regex(r"[A-Za-z0-9_-]{1,6}", fullmatch=True) | st.sampled_from(
    ['"a.b"', "'c d'", '""', '"\\u00e9"', "1.5", "true"]
)
text = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=8)
scalars = st.one_of(
    st.integers(-(2**63), 2**63).map(str),
    st.sampled_from(["0x_ff", "0xff", "0o17", "0b101", "1_000", "+inf", "-nan", "6.02e+23"]),
    st.sampled_from(["true", "false", "1979-05-27", "07:32", "1979-05-27 07:32:00.5-07:00"]),
    text.map(lambda t: '"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    text.filter(lambda t: "'" not in t).map(lambda t: f"'{t}'"),
    text.map(lambda t: '"""\n' + t.replace("\\", "\\\\").replace('"', '\\"') + '"""'),
    text.filter(lambda t: "'" not in t).map(lambda t: f"'''{t}''''"),
)
gaps = st.sampled_from(["", " ", "\n", " # note\n", "\r\n\t"])


def render_values(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def array(items: list[str], gap: str) -> str:
        return "[" + gap + ("," + gap).join(items) + gap + "]"

    def table(pairs: list[tuple[str, str]], gap: str, trailing: bool) -> str:
        body = ("," + gap).join(f"{key} = {value}" for key, value in pairs)
        return "{" + gap + body + ("," if trailing and pairs else "") + gap + "}"

    return st.builds(array, st.lists(children, max_size=3), gaps) | st.builds(
        table,
        st.lists(st.tuples(keys, children), max_size=3, unique_by=lambda pair: pair[0]),
        gaps,
        st.booleans(),
    )


values = st.recursive(scalars, render_values, max_leaves=12)
statements = st.one_of(
    st.builds(lambda key, value: f"{key} = {value}", keys, values),
    st.builds(lambda key, value: f"{key} = {value}", st.just("a.b.c"), values),
    keys.map(lambda key: f"[[{key}]]"),
    st.just("# a comment"),
    st.just(""),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(statements, max_size=6))
def test_the_shim_follows_every_valid_document_without_changing_it(lines):
    document = "\n".join(lines) + "\n"
    try:
        tomli.loads(document)
    except tomli.TOMLDecodeError:
        return  # a generated duplicate key or table clash: not valid TOML
    prepared = prepare(document)
    assert prepared.understood
    assert prepared.text == document
