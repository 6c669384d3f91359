"""What the SDK decides for one action under a loaded policy (policy.md §5).

The server itself never gates actions; this mirrors the SDK so that the console can
explain a receipt, preview a policy, and so that the rules the server ships are tested
against the behaviour clients implement.

The action is a receipt's ``content.action`` object, as decoded JSON::

    {"verb": "payment", "tool_name": "...", "workflow": "...", "account": "...",
     "fields": {...}, "target_host": "...",          # optional
     "ert": {"effect": "spend", "resource_class": "...", ...},   # optional
     "mandate": {"verdict": "valid", ...}}           # optional

A key that is missing (or of the wrong JSON type) simply fails to match; evaluation never
raises for a JSON-shaped mapping.

Order of business: rules in ascending ``order`` (ties in file order), disabled rules
skipped; the first rule whose verb, subject, scope and every condition match decides; no
match routes to a human (``policy.default.deny_unknown``). A matched ``allow``/``redact``
then passes the run-time floors (§5.5), which can turn it into ``require_approval``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from apps.policy.rules.floor import DANGEROUS_VERBS
from apps.policy.rules.model import (
    MANDATE_FIELD,
    MANDATE_KEY_PREFIX,
    Condition,
    DecisionName,
    JsonValue,
    Operator,
    Policy,
    Rule,
    Subject,
)

DEFAULT_RULE_ID = "policy.default.deny_unknown"
FLOOR_DANGEROUS_UNRESOLVED = "policy.floor.dangerous_unresolved"
FLOOR_PAYMENT_NO_MANDATE = "policy.floor.payment_no_mandate"
DANGEROUS_EFFECTS = frozenset({"destroy", "transfer_out", "spend", "grant"})
UNRESOLVED_RESOURCE_CLASS = "unresolved"
WILDCARD_SCOPES = frozenset({"*", ""})

_ABSENT: Final = object()  # a looked-up key that is not there (unlike JSON null)
_NUMBER_TEXT_CHARS = frozenset("0123456789.")


@dataclass(frozen=True)
class Decision:
    """The SDK's verdict: the receipt's ``policy.decision_path`` and ``policy.rule_id``.

    ``rule_id`` is the matched rule's id, or ``policy.default.deny_unknown`` when nothing
    matched, or ``policy.floor.*`` when a run-time floor overrode the match. ``rule`` is the
    rule that matched (still set when a floor overrode it; ``None`` for the default).
    """

    decision_path: DecisionName
    rule_id: str
    rule: Rule | None = None

    @property
    def matched_conditions(self) -> tuple[Condition, ...]:
        """The conditions that held: all of the matched rule's (they are ANDed)."""
        return () if self.rule is None else self.rule.conditions


def evaluate(policy: Policy, action: Mapping[str, object]) -> Decision:
    """The decision for ``action`` (a receipt's ``content.action``) under ``policy``."""
    for rule in policy.evaluation_order:
        if rule.enabled and rule_matches(rule, action):
            return _after_runtime_floors(rule, action)
    return Decision(decision_path="require_approval", rule_id=DEFAULT_RULE_ID)


def rule_matches(rule: Rule, action: Mapping[str, object]) -> bool:
    """Whether verb, subject, scope and every condition of ``rule`` match ``action``."""
    return (
        (rule.verb == "any" or rule.verb == action.get("verb"))
        and _subject_matches(rule.subject, action)
        and _scope_matches(rule.scope, action.get("target_host"))
        and all(condition_holds(condition, action) for condition in rule.conditions)
    )


def _subject_matches(subject: Subject, action: Mapping[str, object]) -> bool:
    if subject.kind == "any":
        return True
    return action.get(subject.kind) == subject.value  # kind names the action key to compare


def _scope_matches(scope: str, host: object) -> bool:
    """§5.3: ``"*"``/``""`` match all; else host equals the scope (minus one leading ``*.``)
    or is a subdomain of it. Case-sensitive; no other wildcards."""
    if scope in WILDCARD_SCOPES:
        return True
    if not isinstance(host, str):
        return False
    base = scope.removeprefix("*.")
    return host == base or host.endswith("." + base)


# -- conditions ---------------------------------------------------------------------------


def condition_holds(condition: Condition, action: Mapping[str, object]) -> bool:
    """§5.4. A key that is absent fails every operator, ``neq`` and ``not_in`` included."""
    found = _look_up(condition, action)
    return found is not _ABSENT and _OPERATIONS[condition.op](found, condition.value)


def _look_up(condition: Condition, action: Mapping[str, object]) -> object:
    """The action value a condition tests: ``fields[field]`` (a flat key, no path syntax),
    or the mandate object / one of its keys for ``mandate`` / ``mandate.<key>``."""
    if condition.field == MANDATE_FIELD:
        return action.get(MANDATE_FIELD, _ABSENT)
    if condition.reads_mandate:
        return _member(action.get(MANDATE_FIELD), condition.field[len(MANDATE_KEY_PREFIX) :])
    return _member(action.get("fields"), condition.field)


def _member(container: object, key: str) -> object:
    mapping = _mapping(container)
    return _ABSENT if mapping is None else mapping.get(key, _ABSENT)


def read_number(value: object) -> float | None:
    """The SDK's number reading: a JSON number as a float; a string by keeping only its
    ASCII digits and dots (``"$1,500.00"`` is 1500, ``"-200"`` is 200, ``"1e3"`` is 13,
    ``"1.2.3"`` is not a number); anything else is not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            return None
    if isinstance(value, str):
        kept = "".join(char for char in value if char in _NUMBER_TEXT_CHARS)
        try:
            return float(kept)
        except ValueError:
            return None
    return None


def _compare(found: object, expected: JsonValue, compare: Callable[[float, float], bool]) -> bool:
    left, right = read_number(found), read_number(expected)
    return left is not None and right is not None and compare(left, right)


def _equal(found: object, expected: JsonValue) -> bool:
    """Numbers first (so ``"v2"`` equals ``"release-2"``), then identical strings, then
    equal booleans; arrays, tables and null never equal anything."""
    left, right = read_number(found), read_number(expected)
    if left is not None and right is not None:
        return left == right
    if isinstance(found, str) and isinstance(expected, str):
        return found == expected
    if isinstance(found, bool) and isinstance(expected, bool):
        return found == expected
    return False


def _is_in(found: object, expected: JsonValue) -> bool:
    return _membership(found, expected) is True


def _is_not_in(found: object, expected: JsonValue) -> bool:
    return _membership(found, expected) is False


def _membership(found: object, expected: JsonValue) -> bool | None:
    """Whether a string field equals a string element of an array value; ``None`` when the
    question does not apply (field not a string, value not an array): then both ``in`` and
    ``not_in`` fail."""
    if not isinstance(found, str) or not isinstance(expected, list):
        return None
    return any(isinstance(item, str) and item == found for item in expected)


def _matches_text(found: object, expected: JsonValue) -> bool:
    """Case-insensitive substring (not a regex, not a glob)."""
    return (
        isinstance(found, str) and isinstance(expected, str) and expected.lower() in found.lower()
    )


_OPERATIONS: Final[dict[Operator, Callable[[object, JsonValue], bool]]] = {
    "gt": lambda found, expected: _compare(found, expected, operator.gt),
    "gte": lambda found, expected: _compare(found, expected, operator.ge),
    "lt": lambda found, expected: _compare(found, expected, operator.lt),
    "lte": lambda found, expected: _compare(found, expected, operator.le),
    "eq": _equal,
    "neq": lambda found, expected: not _equal(found, expected),
    "in": _is_in,
    "not_in": _is_not_in,
    "matches": _matches_text,
    "exists": lambda found, _expected: found is not None,
}


# -- run-time floors ----------------------------------------------------------------------


def _after_runtime_floors(rule: Rule, action: Mapping[str, object]) -> Decision:
    """§5.5: only a matched ``allow`` or ``redact`` can be overridden; ``block`` and
    ``require_approval`` stand as they are."""
    floor_id = None if rule.decision in ("block", "require_approval") else _floor(action)
    if floor_id is None:
        return Decision(decision_path=rule.decision, rule_id=rule.id, rule=rule)
    return Decision(decision_path="require_approval", rule_id=floor_id, rule=rule)


def _floor(action: Mapping[str, object]) -> str | None:
    """The floor that sends this action to a human, if any.

    1. A dangerous action (dangerous verb, or an ERT effect that destroys, moves money out,
       spends or grants) with no classification, or an unresolved one.
    2. Else a payment (verb ``payment`` or effect ``spend``) without a valid mandate.
    """
    verb = _text(action.get("verb"))
    ert = _mapping(action.get("ert"))
    effect = None if ert is None else _text(ert.get("effect"))
    dangerous = verb in DANGEROUS_VERBS or effect in DANGEROUS_EFFECTS
    if dangerous and (ert is None or ert.get("resource_class") == UNRESOLVED_RESOURCE_CLASS):
        return FLOOR_DANGEROUS_UNRESOLVED
    if (verb == "payment" or effect == "spend") and not _has_valid_mandate(action):
        return FLOOR_PAYMENT_NO_MANDATE
    return None


def _has_valid_mandate(action: Mapping[str, object]) -> bool:
    mandate = _mapping(action.get(MANDATE_FIELD))
    return mandate is not None and mandate.get("verdict") == "valid"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: object) -> Mapping[str, object] | None:
    return value if isinstance(value, Mapping) else None
