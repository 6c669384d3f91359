"""Concurrent deploys on PostgreSQL: the PolicyHead row lock lets exactly one win."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

import pytest
from django.db import connection

from apps.policy.models import PolicyDeployment
from apps.policy.selectors import EMPTY_POLICY_HASH, policy_active
from tests.policy.test_policy_api import rule_toml

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DEPLOYERS = 8


def test_concurrent_deploys_expecting_the_same_pin_have_exactly_one_winner(cast, dashboard):
    clients = [dashboard("manager") for _ in range(DEPLOYERS)]
    tomls = [rule_toml(f"rule.{index}", "tool_call", "allow") for index in range(DEPLOYERS)]

    def deploy(index: int) -> int:
        try:
            response = clients[index].post(
                "/v1/policy",
                {"toml": tomls[index], "expected_policy_hash": EMPTY_POLICY_HASH},
                format="json",
            )
            return response.status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=DEPLOYERS) as pool:
        statuses = list(pool.map(deploy, range(DEPLOYERS)))

    assert sorted(statuses) == [HTTPStatus.OK] + [HTTPStatus.CONFLICT] * (DEPLOYERS - 1)
    winner = tomls[statuses.index(HTTPStatus.OK)]
    assert policy_active(org=cast.acme).toml == winner
    assert PolicyDeployment.objects.filter(org=cast.acme).count() == 1
