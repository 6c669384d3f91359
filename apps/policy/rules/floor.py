"""The dangerous-lane floor checked at load time (policy.md §4).

A policy may tighten what the SDK lets through, never widen it without a human on the
dangerous lanes. So a file whose enabled ``allow`` rule opens a dangerous verb too broadly is
refused as a whole (HTTP 409), even when an earlier rule would shadow it: every rule is
judged on its own, in file order, and the first offender is reported.

* ``payment``: the allow must test the mandate (a condition on ``mandate`` or
  ``mandate.<key>``, any operator, any value). Nothing else narrows a payment.
* ``data_export``, ``account_change``, ``delete`` and ``any``: the allow needs at least one
  condition (any condition at all) or a ``workflow``/``account`` subject.
* ``llm_call``, ``tool_call``, ``http_request``: never policed.

A file with no rule at all for a dangerous lane is fine: such actions fall to the
deny-unknown default. ``scope`` and ``client_clearable`` never matter here.
"""

from __future__ import annotations

from apps.policy.rules.model import Policy, Rule, Verb

DANGEROUS_VERBS: frozenset[Verb] = frozenset({"payment", "data_export", "account_change", "delete"})


def find_floor_bypass(policy: Policy) -> Rule | None:
    """The first rule, in file order, that bypasses the floor; ``None`` if none does."""
    return next((rule for rule in policy.rules if bypasses_floor(rule)), None)


def bypasses_floor(rule: Rule) -> bool:
    """Whether this one rule, on its own, widens a dangerous lane."""
    if not rule.enabled or rule.decision != "allow":
        return False
    if rule.verb == "payment":
        return not any(condition.reads_mandate for condition in rule.conditions)
    if rule.verb in DANGEROUS_VERBS or rule.verb == "any":
        return not rule.conditions and rule.subject.kind == "any"
    return False


def floor_bypass_detail(rule: Rule) -> str:
    """Why ``rule`` bypasses the floor, naming its id and verb."""
    if rule.verb == "payment":
        return (
            f"rule {rule.id!r} allows verb payment without a condition on the mandate "
            "(field mandate or mandate.<key>); gate it with require_approval instead"
        )
    return (
        f"rule {rule.id!r} allows verb {rule.verb} for every agent with no condition; "
        "add a condition, narrow the subject, or gate it with require_approval"
    )
