from __future__ import annotations

import base64
import os
import time
from typing import Any

import pytest
from nacl.signing import SigningKey
from rest_framework.test import APIClient

from apps.approvals.services import approver_key_register
from apps.approvals.tokens import l1_cosign_payload, quorum_cosign_payload
from apps.receipts.verifier import content_bytes
from tests.approvals.signing import sign_approval_token
from tests.receipts.factories import Agent, public_b64

DOMAIN_APPROVAL = b"heso-approval/v1\x00"


class Approver:
    """An approver's device: its own key, minting tokens and co-signed legs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.key = SigningKey.generate()

    @property
    def public(self) -> str:
        return public_b64(self.key)

    def token(
        self,
        content: dict[str, Any],
        *,
        scope: str,
        decision: str = "approved",
        expiry: int | None = None,
        nonce: bytes | None = None,
    ) -> str:
        return self.token_over(
            content_bytes(content), scope=scope, decision=decision, expiry=expiry, nonce=nonce
        )

    def token_over(
        self,
        canonical: bytes,
        *,
        scope: str,
        decision: str = "approved",
        expiry: int | None = None,
        nonce: bytes | None = None,
    ) -> str:
        """A token over ``canonical``, the bytes A the vote signs (expiring in ten minutes)."""
        raw = sign_approval_token(
            self.key,
            nonce=nonce or os.urandom(32),
            expiry=expiry if expiry is not None else int(time.time()) + 600,
            decision=decision,  # type: ignore[arg-type]
            scope=scope,
            action_canonical=canonical,
        )
        return base64.b64encode(raw).decode()

    def record(self, decision: str = "approved") -> str:
        return (
            f'{{"decision":"{decision}","approver_identity":"{self.public}","reason":"ok",'
            '"decided_at":"2026-11-22T10:00:00Z"}'
        )

    def leg(
        self, content: dict[str, Any], *, threshold: int = 1, roster: list[str] | None = None
    ) -> tuple[str, str]:
        record = self.record()
        if threshold == 1:
            payload = l1_cosign_payload(content, record)
        else:
            payload = quorum_cosign_payload(content, threshold, roster or [], record)
        return record, base64.b64encode(self.key.sign(payload).signature).decode()


@pytest.fixture
def approvers(cast) -> list[Approver]:
    team = [Approver(name) for name in ("alice", "bob", "carol")]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    return team


@pytest.fixture
def sdk_client(cast) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    return client


def suspended_receipt(agent: Agent) -> dict[str, Any]:
    """An L0 action the policy routed to a human."""
    return agent.receipt(
        policy={
            "rule_id": "payments.review",
            "rule_display": "When any agent performs payment, then require approval.",
            "matched_conditions": [{"field": "verb", "op": "eq", "value": "payment"}],
            "decision_path": "require_approval",
        }
    )
