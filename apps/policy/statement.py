"""The statement an approver signs to approve (or reject) a policy change.

A co-signed deploy's vote is an approval token (approvals.md §1-§3: the layout and the
verification unchanged) whose scope is ``policy:deploy`` and whose signed bytes ``A`` are
the RFC 8785 canonical bytes of::

    {"type": "countersign.policy_change/v1", "org": <org slug>, "policy_hash": <hex>,
     "previous_policy_hash": <hex, or "" when it replaces the fail-safe empty policy>,
     "policy_id": <id>}

The ``type`` member makes it impossible to read as an ActionContent (whose schema is
closed), so a token signed over it approves nothing else, and no action token approves
a policy change. Pure: no Django, no database.
"""

from __future__ import annotations

from typing import Any

from apps.receipts.verifier import canonicalize

STATEMENT_TYPE = "countersign.policy_change/v1"
POLICY_DEPLOY_SCOPE = "policy:deploy"


def policy_change_statement(
    *, org_slug: str, policy_hash: str, previous_policy_hash: str, policy_id: str
) -> dict[str, Any]:
    return {
        "type": STATEMENT_TYPE,
        "org": org_slug,
        "policy_hash": policy_hash,
        "previous_policy_hash": previous_policy_hash,
        "policy_id": policy_id,
    }


def statement_bytes(statement: dict[str, Any]) -> bytes:
    """``A``: the canonical (RFC 8785) bytes an approver's token signs."""
    return canonicalize(statement)
