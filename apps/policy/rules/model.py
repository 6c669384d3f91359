"""The rule model a policy file loads into (policy.md §§1-2).

These classes hold a policy *after* every check of §§1-3 has passed, so code that reads
them (the floor, evaluation, JSON rendering) never re-validates. Condition values are kept
in the JSON form the SDK itself works with (see :mod:`apps.policy.rules.json_values`), so
evaluation and rendering see exactly the same value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from apps.common.vocabulary import DECISION_PATHS, DecisionPath
from apps.common.vocabulary import VERBS as RECEIPT_VERBS
from apps.common.vocabulary import Verb as ReceiptVerb

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

# A rule names a receipt verb, or ``any``; it decides what a receipt's decision_path says.
Verb: TypeAlias = Literal[ReceiptVerb, "any"]
DecisionName: TypeAlias = DecisionPath
Operator: TypeAlias = Literal[
    "gt", "gte", "lt", "lte", "eq", "neq", "in", "not_in", "exists", "matches"
]
SubjectKind: TypeAlias = Literal["any", "workflow", "account"]

VERBS: tuple[Verb, ...] = (*RECEIPT_VERBS, "any")
DECISIONS: tuple[DecisionName, ...] = DECISION_PATHS
OPERATORS: tuple[Operator, ...] = (
    "gt",
    "gte",
    "lt",
    "lte",
    "eq",
    "neq",
    "in",
    "not_in",
    "exists",
    "matches",
)
SUBJECT_KINDS: tuple[SubjectKind, ...] = ("any", "workflow", "account")

MANDATE_FIELD = "mandate"
MANDATE_KEY_PREFIX = MANDATE_FIELD + "."


@dataclass(frozen=True)
class Subject:
    """Which agents a rule covers: every agent, or one workflow, or one account.

    ``value`` is ``None`` exactly when ``kind`` is ``"any"``.
    """

    kind: SubjectKind
    value: str | None = None


@dataclass(frozen=True)
class Condition:
    """One ``conditions`` entry. ``value`` is JSON (treat it as read-only)."""

    field: str
    op: Operator
    value: JsonValue
    display: str | None = None

    @property
    def reads_mandate(self) -> bool:
        """``mandate`` / ``mandate.<key>`` read the action's mandate, never its ``fields``."""
        return self.field == MANDATE_FIELD or self.field.startswith(MANDATE_KEY_PREFIX)


@dataclass(frozen=True)
class Rule:
    """One ``[[rule]]`` with every optional key resolved to its default.

    ``sla_minutes`` stays ``None`` when absent, which is not the same as ``0`` (§2).
    """

    id: str
    order: int
    enabled: bool
    subject: Subject
    verb: Verb
    scope: str
    decision: DecisionName
    conditions: tuple[Condition, ...] = ()
    approvers: tuple[str, ...] = ()
    sla_minutes: int | None = None
    client_clearable: bool = False


@dataclass(frozen=True)
class Policy:
    """A loaded policy: its rules in file order (disabled ones included).

    The empty policy (no rules) is valid: every action falls to the deny-unknown default.
    """

    rules: tuple[Rule, ...] = ()

    @property
    def evaluation_order(self) -> tuple[Rule, ...]:
        """The rules as the SDK tries them: ascending ``order``, ties kept in file order."""
        return tuple(sorted(self.rules, key=lambda rule: rule.order))
