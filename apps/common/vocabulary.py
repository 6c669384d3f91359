"""The receipt format's words, declared once (receipts.md; server.md §1), on the ground floor
so that every layer derives its own lists from them.

Pure Python: each word list is a ``Literal`` type (for the type checker) and the tuple of
its values (for code), and the decoder's enums, the policy types, the approvals' choices,
the console's filters and the OpenAPI enums are all derived from them.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

# What an action is (``content.action.verb``).
Verb: TypeAlias = Literal[
    "llm_call", "tool_call", "http_request", "payment", "data_export", "account_change", "delete"
]
# What the policy decided (``content.policy.decision_path``).
DecisionPath: TypeAlias = Literal["allow", "block", "redact", "require_approval"]
# L0: the producer's own signature; L1: countersigned by a registered decision key.
TrustLevelName: TypeAlias = Literal["L0", "L1"]
# Lifecycle links (``content.lifecycle.kind``); an absent kind is an ``action``.
LifecycleKind: TypeAlias = Literal[
    "action", "suspended", "approved", "denied", "expired", "escalated", "completed",
    "key_rotation",
]  # fmt: skip
# The lifecycle kinds a decision key signs (server.md §1: L1 only from a registered key).
DecisionKind: TypeAlias = Literal["approved", "denied", "expired", "escalated"]
# What a suspended action's signed approval terms do once they expire undecided.
OnTimeout: TypeAlias = Literal["deny", "escalate", "auto_approve"]
# An approver record's decision.
RecordDecision: TypeAlias = Literal["approved", "rejected", "escalated"]

VERBS: tuple[Verb, ...] = get_args(Verb)
DECISION_PATHS: tuple[DecisionPath, ...] = get_args(DecisionPath)
TRUST_LEVELS: tuple[TrustLevelName, ...] = get_args(TrustLevelName)
LIFECYCLE_KINDS: tuple[LifecycleKind, ...] = get_args(LifecycleKind)
DECISION_KINDS: tuple[DecisionKind, ...] = get_args(DecisionKind)
ON_TIMEOUT: tuple[OnTimeout, ...] = get_args(OnTimeout)
RECORD_DECISIONS: tuple[RecordDecision, ...] = get_args(RecordDecision)
