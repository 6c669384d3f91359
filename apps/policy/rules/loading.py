"""Loading a policy file: the one call the deploy endpoints make (policy.md §4, §6).

Loading runs in two stages and the first failure decides the outcome:

1. parse - TOML (§3) and the rule model (§§1-2); any failure is ``parse_error`` (HTTP 422),
   even when the document would also bypass the floor;
2. floor - only for a document that parsed completely; an offender is ``floor_bypass``
   (HTTP 409).

:func:`load_policy` never raises for bad input: the outcome is always a :class:`LoadResult`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from apps.policy.rules.document import parse_policy
from apps.policy.rules.errors import PolicyParseError
from apps.policy.rules.floor import find_floor_bypass, floor_bypass_detail
from apps.policy.rules.model import Policy

LoadOutcome: TypeAlias = Literal["ok", "parse_error", "floor_bypass"]

EMPTY_POLICY_TOML = ""
"""The fail-safe pin (§6): a valid policy with no rules, so every action routes to a human.
Served for an org with no resolvable policy; deploying it explicitly means the same."""


@dataclass(frozen=True)
class LoadResult:
    """The outcome of loading one TOML text.

    * ``ok``: ``policy`` is set, ``detail`` and ``rule_id`` are ``None``.
    * ``parse_error``: ``detail`` says where and why; ``policy`` and ``rule_id`` are ``None``.
    * ``floor_bypass``: ``detail`` names the offending rule and verb, ``rule_id`` is that
      rule's id; ``policy`` is ``None`` (the file must not be served).

    The wording of ``detail`` is ours (policy.md §9 question 7); do not match on it.
    """

    result: LoadOutcome
    detail: str | None = None
    policy: Policy | None = None
    rule_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.result == "ok"


def load_policy(toml_text: str) -> LoadResult:
    """Validate ``toml_text`` exactly as sent (never trim or normalise it first)."""
    try:
        policy = parse_policy(toml_text)
    except PolicyParseError as error:
        return LoadResult(result="parse_error", detail=str(error))
    except RecursionError:  # only for absurd depths (thousands of nested dotted keys)
        return LoadResult(result="parse_error", detail="the document nests too deeply")
    offender = find_floor_bypass(policy)
    if offender is not None:
        return LoadResult(
            result="floor_bypass", detail=floor_bypass_detail(offender), rule_id=offender.id
        )
    return LoadResult(result="ok", policy=policy)
