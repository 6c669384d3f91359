"""``@heso.gated`` sessions for tests: the links the real SDK writes (tests/data/sdk/
corpus.json's ``gated_*`` flows) re-minted for a fresh action and a signed expiry still
ahead, signed as the SDK signs them (receipts.md §12): the ``suspended`` link by the
operator under the suspend domain, the decision link by the decision key under the decision
domain, the ``completed`` link by the operator under the action domain."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from nacl.signing import SigningKey

from apps.receipts.verifier import link_hash
from tests.interop.corpus import FLOWS
from tests.receipts.factories import (
    ACTION_DOMAIN,
    Agent,
    canonical_bytes,
    public_b64,
    seal,
    signature_entry,
)

SUSPEND_DOMAIN = b"heso-action-suspend/v1\x00"
DECISION_DOMAIN = b"heso-action-decision/v1\x00"
# heso.gated's public placeholder decision key (seed [7u8; 32]).
PLACEHOLDER_SEED = bytes([7] * 32)
FUTURE = "2999-01-01T00:00:00Z"
_amounts = itertools.count(1000)


def _template(kind: str) -> dict[str, Any]:
    flow = "gated_denied" if kind == "denied" else "gated_approved"
    (link,) = [r for r in FLOWS[flow]["receipts"] if r["content"].get("kind") == kind]
    content: dict[str, Any] = copy.deepcopy(link["content"])
    return content


def _signed(content: dict[str, Any], key: SigningKey, role: str, domain: bytes) -> dict[str, Any]:
    sealed = seal(content)
    return {
        "alg": "heso-action/v2+ed25519",
        "content": sealed,
        "signatures": [signature_entry(key, role, domain + canonical_bytes(sealed))],
    }


def gated_session(
    operator: Agent,
    decision_key: SigningKey,
    *,
    session_id: str,
    decision: str = "approved",
    expires_at: str = FUTURE,
) -> list[dict[str, Any]]:
    """The session's chain, in push order: ``suspended``, the ``decision`` link
    (``approved`` or ``denied``) and, after an approval, ``completed``."""
    suspended = _template("suspended")
    action = {**suspended["action"], "fields": {**suspended["action"]["fields"],
                                                "amount": next(_amounts)}}  # fmt: skip
    suspended.update(agent_identity=operator.identity, action=action, session_id=session_id)
    suspended["suspension"]["approval"]["expires_at"] = expires_at
    chain = [_signed(suspended, operator.key, "operator", SUSPEND_DOMAIN)]

    decided = _template(decision)
    decided.update(agent_identity=operator.identity, action=action, session_id=session_id,
                   prev_receipt_hash=link_hash(chain[-1]["content"]))  # fmt: skip
    decided["approver_decision"]["approver_identity"] = public_b64(decision_key)
    chain.append(_signed(decided, decision_key, "approver", DECISION_DOMAIN))
    if decision != "approved":
        return chain

    completed = _template("completed")
    completed.update(action=action, session_id=session_id,
                     prev_receipt_hash=link_hash(chain[-1]["content"]))  # fmt: skip
    chain.append(_signed(completed, operator.key, "operator", ACTION_DOMAIN))
    return chain
