"""From TOML data to the rule model (policy.md §§1-2).

The SDK refuses a policy whose rules are mistyped, so the server must too: types are
strict (no coercion between strings, numbers and booleans; a datetime is never a string),
values are case-sensitive, and every integer must fit the width the SDK stores it in.
Keys the SDK ignores (other top-level keys, unknown rule keys, extra subject and condition
keys) are ignored here as well, apart from the integer-range check that the SDK applies to
everything inside ``subject`` and a condition's ``value``.

Error messages name the place with a path such as ``rule[2].conditions[0].op`` (indexes
count from 0, in file order).
"""

from __future__ import annotations

from typing import TypeVar

from apps.policy.rules.errors import PolicyParseError
from apps.policy.rules.json_values import toml_to_json
from apps.policy.rules.model import (
    DECISIONS,
    OPERATORS,
    SUBJECT_KINDS,
    VERBS,
    Condition,
    Policy,
    Rule,
    Subject,
)
from apps.policy.rules.toml_dialect import find_integer_outside, parse_toml

I64 = (-(2**63), 2**63 - 1)
U32 = (0, 2**32 - 1)
JSON_INTEGER = (-(2**63), 2**64 - 1)  # what the SDK's JSON numbers hold (i64 or u64)

Name = TypeVar("Name", bound=str)


def parse_policy(toml_text: str) -> Policy:
    """The policy in ``toml_text``, or :class:`PolicyParseError` naming the first problem."""
    document = parse_toml(toml_text)
    if "rule" not in document:
        return Policy()
    entries = document["rule"]
    if not isinstance(entries, list):
        raise PolicyParseError(f"rule must be an array of tables ([[rule]]), not {_kind(entries)}")
    return Policy(
        rules=tuple(_rule(entry, f"rule[{index}]") for index, entry in enumerate(entries))
    )


def _rule(entry: object, where: str) -> Rule:
    table = _table(entry, where)
    sla_minutes = table.get("sla_minutes")
    return Rule(
        id=_string(_required(table, "id", where), f"{where}.id"),
        order=_integer(_required(table, "order", where), f"{where}.order", I64),
        enabled=_boolean(_required(table, "enabled", where), f"{where}.enabled"),
        subject=_subject(_required(table, "subject", where), f"{where}.subject"),
        verb=_choice(_required(table, "verb", where), VERBS, f"{where}.verb"),
        scope=_string(_required(table, "scope", where), f"{where}.scope"),
        decision=_name(_required(table, "decision", where), DECISIONS, f"{where}.decision"),
        conditions=_conditions(table.get("conditions", []), f"{where}.conditions"),
        approvers=_strings(table.get("approvers", []), f"{where}.approvers"),
        sla_minutes=None
        if sla_minutes is None
        else _integer(sla_minutes, f"{where}.sla_minutes", U32),
        client_clearable=_boolean(
            table.get("client_clearable", False), f"{where}.client_clearable"
        ),
    )


def _subject(value: object, where: str) -> Subject:
    table = _table(value, where)
    _require_json_integers(table, where)
    kind = _choice(_required(table, "kind", where), SUBJECT_KINDS, f"{where}.kind")
    if kind == "any":
        return Subject(kind="any")
    return Subject(kind=kind, value=_string(_required(table, "value", where), f"{where}.value"))


def _conditions(value: object, where: str) -> tuple[Condition, ...]:
    if not isinstance(value, list):
        raise PolicyParseError(f"{where} must be an array of tables, not {_kind(value)}")
    return tuple(_condition(item, f"{where}[{index}]") for index, item in enumerate(value))


def _condition(item: object, where: str) -> Condition:
    table = _table(item, where)
    value = _required(table, "value", where)  # required even for `exists`
    _require_json_integers(value, f"{where}.value")
    display = table.get("display")
    return Condition(
        field=_string(_required(table, "field", where), f"{where}.field"),
        op=_name(_required(table, "op", where), OPERATORS, f"{where}.op"),
        value=toml_to_json(value),
        display=None if display is None else _string(display, f"{where}.display"),
    )


# -- typed readers: each returns the value with its precise type or raises -----------------


def _required(table: dict[str, object], key: str, where: str) -> object:
    if key not in table:
        raise PolicyParseError(f"{where}: missing required key {key}")
    return table[key]


def _table(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise PolicyParseError(f"{where} must be a table, not {_kind(value)}")
    return value


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise PolicyParseError(f"{where} must be a string, not {_kind(value)}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise PolicyParseError(f"{where} must be an array of strings, not {_kind(value)}")
    return tuple(_string(item, f"{where}[{index}]") for index, item in enumerate(value))


def _boolean(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyParseError(f"{where} must be a boolean, not {_kind(value)}")
    return value


def _integer(value: object, where: str, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyParseError(f"{where} must be an integer, not {_kind(value)}")
    low, high = bounds
    if not low <= value <= high:
        raise PolicyParseError(f"{where} = {value} is outside {low} .. {high}")
    return value


def _choice(value: object, allowed: tuple[Name, ...], where: str) -> Name:
    """One of ``allowed``, spelled exactly (values are case-sensitive)."""
    text = _string(value, where)
    for option in allowed:
        if text == option:
            return option
    raise PolicyParseError(f"{where} = {text!r} is not one of {', '.join(allowed)}")


def _name(value: object, allowed: tuple[Name, ...], where: str) -> Name:
    """Like :func:`_choice`, but the one-key table spelling ``{ allow = {} }`` also counts
    (policy.md §2.3; used for ``decision`` and ``op`` only)."""
    if isinstance(value, dict):
        value = _table_spelling(value, where)
    return _choice(value, allowed, where)


def _table_spelling(table: dict[str, object], where: str) -> str:
    body = next(iter(table.values()), None)
    if len(table) != 1 or body != {}:
        raise PolicyParseError(f"{where} as a table must be exactly {{ <name> = {{}} }}")
    return next(iter(table))


def _require_json_integers(value: object, where: str) -> None:
    outside = find_integer_outside(value, *JSON_INTEGER)
    if outside is not None:
        raise PolicyParseError(f"{where}: integer {outside} does not fit a JSON number (i64/u64)")


def _kind(value: object) -> str:
    """The TOML name of a value's type, for error messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date/time"
