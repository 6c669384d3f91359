from __future__ import annotations

import json
from typing import Any

import pytest
from nacl.signing import SigningKey
from rest_framework.test import APIClient

from tests.receipts.factories import Agent, as_text


@pytest.fixture
def agent() -> Agent:
    return Agent()


@pytest.fixture
def approver_key() -> SigningKey:
    return SigningKey.generate()


class Pusher:
    """Pushes receipts as an SDK would: raw JSON text, exactly as given."""

    def __init__(self, client: APIClient, secret: str) -> None:
        self.client = client
        self.secret = secret

    def raw(self, body: str | bytes, content_type: str = "application/json") -> Any:
        return self.client.generic(
            "POST", "/v1/receipts", body, content_type=content_type, HTTP_X_API_KEY=self.secret
        )

    def __call__(self, receipt: dict[str, Any] | str, supersedes: str | None = None) -> Any:
        text = receipt if isinstance(receipt, str) else as_text(receipt)
        suffix = "" if supersedes is None else f',"supersedes_action_hash":{json.dumps(supersedes)}'
        return self.raw('{"receipt":' + text + suffix + "}")
