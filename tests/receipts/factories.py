"""Signed ActionReceipts for tests, built with PyNaCl the way the SDK builds them.

Uses the project's canonicalizer for C (receipts.md §4); its byte-exactness is proven
separately against the reference vectors in tests/receipts/verifier.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
from typing import Any

from nacl.signing import SigningKey

from apps.receipts.verifier import canonicalize, content_hash, link_hash

ACTION_DOMAIN = b"heso-action/v1\x00"
APPROVAL_DOMAIN = b"heso-approval/v1\x00"
_counter = itertools.count(1)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def public_b64(key: SigningKey) -> str:
    return b64(bytes(key.verify_key))


def canonical_bytes(content: dict[str, Any]) -> bytes:
    return canonicalize({k: v for k, v in content.items() if k != "action_hash"})


def seal(content: dict[str, Any]) -> dict[str, Any]:
    """Set ``action_hash`` from the content (receipts.md §5)."""
    sealed = {k: v for k, v in content.items() if k != "action_hash"}
    sealed["action_hash"] = content_hash(sealed)
    return sealed


def signature_entry(key: SigningKey, role: str, message: bytes) -> dict[str, str]:
    return {
        "algorithm": "Ed25519",
        "key_id": role,
        "public_key": public_b64(key),
        "signature": b64(key.sign(message).signature),
    }


class Agent:
    """An operator key that signs receipts, optionally inside a session chain."""

    def __init__(self, seed: bytes | None = None) -> None:
        self.key = SigningKey(seed) if seed else SigningKey.generate()

    @property
    def identity(self) -> str:
        return public_b64(self.key)

    def content(self, **overrides: Any) -> dict[str, Any]:
        """Fresh L0 content; every call gives a new action unless ``fields`` is fixed."""
        content: dict[str, Any] = {
            "action_version": "heso-action/2.0",
            "captured_at": "2026-11-20T10:00:00Z",
            "agent_identity": self.identity,
            "action": {
                "verb": "tool_call",
                "tool_name": "search",
                "target_host": "api.example.com",
                "workflow": "ops/nightly",
                "account": "org/unit",
                "fields": {"query": "weather", "n": next(_counter)},
            },
            "policy": {
                "rule_id": "tool_call.allow",
                "rule_display": "When any agent performs tool_call, then allow.",
                "matched_conditions": [{"field": "verb", "op": "eq", "value": "tool_call"}],
                "decision_path": "allow",
            },
            "trust_level": "L0",
        }
        content.update(overrides)
        return content

    def sign(self, content: dict[str, Any]) -> dict[str, Any]:
        sealed = seal(content)
        return {
            "alg": "heso-action/v2+ed25519",
            "content": sealed,
            "signatures": [
                signature_entry(self.key, "operator", ACTION_DOMAIN + canonical_bytes(sealed))
            ],
        }

    def receipt(self, **overrides: Any) -> dict[str, Any]:
        return self.sign(self.content(**overrides))

    def session(self, session_id: str, length: int, **overrides: Any) -> list[dict[str, Any]]:
        """``length`` receipts linked as one session chain (receipts.md §13)."""
        chain: list[dict[str, Any]] = []
        for seq in range(length):
            block: dict[str, Any] = {"session_id": session_id, "seq": seq}
            if chain:
                block["prev_receipt_hash"] = link_hash(chain[-1]["content"])
            chain.append(self.receipt(**block, **overrides))
        return chain

    def approve_l1(
        self, suspended: dict[str, Any], approver: SigningKey, **record: Any
    ) -> dict[str, Any]:
        """The single-approver L1 form of a suspended L0 receipt (approvals.md §5, §7.1)."""
        body = copy.deepcopy({k: v for k, v in suspended["content"].items() if k != "action_hash"})
        body["approver_decision"] = {
            "decision": "approved",
            "approver_identity": public_b64(approver),
            "reason": "looks fine",
            "decided_at": "2026-11-20T10:05:00Z",
            **record,
        }
        body["trust_level"] = "L1"
        sealed = seal(body)
        c = canonical_bytes(sealed)
        return {
            "alg": "heso-action/v2+ed25519",
            "content": sealed,
            "signatures": [
                signature_entry(self.key, "operator", ACTION_DOMAIN + c),
                signature_entry(approver, "approver", APPROVAL_DOMAIN + c),
            ],
        }


def as_text(receipt: dict[str, Any]) -> str:
    return json.dumps(receipt, separators=(",", ":"), ensure_ascii=False)
