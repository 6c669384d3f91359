"""Small TOML builders so each test shows only what it is about."""

from __future__ import annotations

BASE_RULE = {
    "id": '"r1"',
    "order": "10",
    "enabled": "true",
    "subject": '{ kind = "any" }',
    "verb": '"llm_call"',
    "scope": '"*"',
    "decision": '"allow"',
}


def rule(**keys: str | None) -> str:
    """A ``[[rule]]`` block: the base rule with keys set to raw TOML text, or removed (None).

    ``rule(verb='"delete"', conditions='[{ field = "x", op = "eq", value = 1 }]')``
    """
    merged = {**BASE_RULE, **keys}
    lines = [f"{key} = {value}" for key, value in merged.items() if value is not None]
    return "[[rule]]\n" + "\n".join(lines) + "\n"


def condition(field: str = "amount", op: str = "gt", value: str = "1") -> str:
    """An inline ``conditions`` array holding one condition (raw TOML for ``value``)."""
    return f'[{{ field = "{field}", op = "{op}", value = {value} }}]'
