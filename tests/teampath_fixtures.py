"""Fixtures of the team-path profile's tests, wherever they live (tests/receipts,
tests/approvals, tests/policy, tests/api): registered for the whole suite by
``pytest_plugins`` in tests/conftest.py.

A team-path test module sets ``pytestmark = TEAMPATH``: the profile's URL conf, the
database, and ``API_PROFILE = "teampath"``. Then ``acme``, ``globex`` and ``anonymous``
call the API as the SDK does, and ``assert_error`` checks the profile's error body.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.receipts.factories import Agent, as_text


@pytest.fixture
def teampath_profile(settings: Any) -> None:
    """Answers built outside DRF (middleware) follow the deployment's profile."""
    settings.API_PROFILE = "teampath"


TEAMPATH = [
    pytest.mark.urls("config.urls.teampath"),
    pytest.mark.django_db,
    pytest.mark.usefixtures("teampath_profile"),
]


@pytest.fixture
def agent() -> Agent:
    return Agent()


class TeamPathCaller:
    """Calls the team-path API as its SDK does: ``Authorization: Bearer <key>``, raw JSON."""

    def __init__(self, secret: str | None) -> None:
        self.client = APIClient()
        self.secret = secret

    def headers(self, extra: dict[str, str]) -> dict[str, str]:
        if self.secret is None:
            return extra
        return {"HTTP_AUTHORIZATION": f"Bearer {self.secret}", **extra}

    def get(self, path: str, **headers: str) -> Any:
        return self.client.get(path, **self.headers(headers))

    def post(
        self,
        path: str,
        body: str | bytes | dict[str, Any] | list[Any],
        content_type: str = "application/json",
        **headers: str,
    ) -> Any:
        text = body if isinstance(body, str | bytes) else json.dumps(body)
        return self.client.generic(
            "POST", path, text, content_type=content_type, **self.headers(headers)
        )

    def push(self, receipt: dict[str, Any] | str) -> Any:
        return self.post("/v1/receipts", receipt if isinstance(receipt, str) else as_text(receipt))

    def batch(self, receipts: list[Any]) -> Any:
        items = [r if isinstance(r, str) else as_text(r) for r in receipts]
        return self.post("/v1/receipts/batch", '{"receipts":[' + ",".join(items) + "]}")


@pytest.fixture
def acme(cast: Any) -> TeamPathCaller:
    return TeamPathCaller(cast.acme_key.secret)


@pytest.fixture
def globex(cast: Any) -> TeamPathCaller:
    return TeamPathCaller(cast.globex_key.secret)


@pytest.fixture
def anonymous(cast: Any) -> TeamPathCaller:
    return TeamPathCaller(None)


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is ``status`` with the team-path error body naming ``code``."""
    assert response.status_code == status, response.content
    body: dict[str, Any] = response.json()
    assert body["error"] == code
    assert isinstance(body["message"], str)
    assert body["message"]
    return body
