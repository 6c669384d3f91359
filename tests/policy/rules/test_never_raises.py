"""load_policy never raises, whatever text it is given: the outcome is always a LoadResult."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.policy.rules import LoadResult, evaluate, load_policy, render_policy_json
from tests.policy.rules.builders import rule

FRAGMENTS = [
    "[[rule]]\n",
    "[rule]\n",
    "[rule.subject]\n",
    "[[rule.conditions]]\n",
    rule(),
    rule(verb='"delete"'),
    'id = "r1"\n',
    "order = 10\n",
    "order = 9223372036854775808\n",
    "enabled = true\n",
    'subject = { kind = "any" }\n',
    'subject = { kind = "workflow", value = "w" }\n',
    'verb = "payment"\n',
    'scope = "*"\n',
    'decision = "allow"\n',
    "decision = { allow = {} }\n",
    'conditions = [{ field = "mandate.verdict", op = "eq", value = "valid" }]\n',
    'field = "a"\n',
    "op = { gt = {} }\n",
    "value = ",
    "sla_minutes = 4294967296\n",
    "=",
    "{",
    "}",
    "[",
    "]",
    ",",
    ".",
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    "\\e",
    "\\x4",
    "#",
    "\n",
    "\r\n",
    "\r",
    " ",
    "\t",
    "\ufeff",
    "\x00",
    "\ud800",
    "1e400",
    "nan",
    "0x" + "f" * 33,
    "1979-05-27",
    " 07:32:60",
    "0000-02-29T",
    "[" * 90,
    ".".join(["k"] * 90),
]

toml_ish = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=4), max_size=30).map("".join)


def check(toml_text: str) -> None:
    loaded = load_policy(toml_text)
    assert isinstance(loaded, LoadResult)
    assert (loaded.policy is not None) == (loaded.result == "ok")
    if loaded.policy is not None:
        render_policy_json(loaded.policy)
        evaluate(loaded.policy, {"verb": "delete", "fields": {}})


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_load_policy_never_raises_on_random_text(toml_text):
    check(toml_text)


@settings(max_examples=200, deadline=None)
@given(toml_ish)
def test_load_policy_never_raises_on_toml_ish_text(toml_text):
    check(toml_text)
