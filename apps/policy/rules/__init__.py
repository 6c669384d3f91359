"""Policy files (``heso.toml``): load, check, evaluate, render, hash. Pure Python, no Django.

Implements shared/spec/policy.md (with server.md §7) and is tested against the reference
vectors in tests/data/vectors/policy_*.json. Modules, in the order a policy meets them:

* :mod:`~apps.policy.rules.toml_dialect` - the TOML text as the SDK reads it (§3);
* :mod:`~apps.policy.rules.document` and :mod:`~apps.policy.rules.model` - the rules (§§1-2);
* :mod:`~apps.policy.rules.floor` - the dangerous-lane floor (§4);
* :mod:`~apps.policy.rules.loading` - both stages together, and the empty policy (§6);
* :mod:`~apps.policy.rules.evaluate` - what the SDK decides for an action (§5);
* :mod:`~apps.policy.rules.render` - the team-path JSON (§8);
* :mod:`~apps.policy.rules.identity` - hash and id (§7).
"""

from apps.policy.rules.evaluate import (
    DEFAULT_RULE_ID,
    FLOOR_DANGEROUS_UNRESOLVED,
    FLOOR_PAYMENT_NO_MANDATE,
    Decision,
    evaluate,
)
from apps.policy.rules.floor import DANGEROUS_VERBS
from apps.policy.rules.identity import policy_hash, policy_id, policy_id_for_hash
from apps.policy.rules.loading import EMPTY_POLICY_TOML, LoadOutcome, LoadResult, load_policy
from apps.policy.rules.model import (
    Condition,
    DecisionName,
    JsonValue,
    Operator,
    Policy,
    Rule,
    Subject,
    Verb,
)
from apps.policy.rules.render import render_policy_json, render_rule

__all__ = [
    "DANGEROUS_VERBS",
    "DEFAULT_RULE_ID",
    "EMPTY_POLICY_TOML",
    "FLOOR_DANGEROUS_UNRESOLVED",
    "FLOOR_PAYMENT_NO_MANDATE",
    "Condition",
    "Decision",
    "DecisionName",
    "JsonValue",
    "LoadOutcome",
    "LoadResult",
    "Operator",
    "Policy",
    "Rule",
    "Subject",
    "Verb",
    "evaluate",
    "load_policy",
    "policy_hash",
    "policy_id",
    "policy_id_for_hash",
    "render_policy_json",
    "render_rule",
]
