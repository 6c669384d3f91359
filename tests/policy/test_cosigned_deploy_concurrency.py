"""Concurrent votes on one proposal (PostgreSQL): the proposal row lock counts each vote
exactly once and activates the version exactly once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.approvals.services import approver_key_register
from apps.policy.models import PolicyDeployment, PolicyProposal, ProposalStatus
from apps.tenancy.services import org_set_policy_quorum
from tests.policy.test_cosigned_deploys import Device
from tests.policy.test_policy_api import ALLOW_SEARCH

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

VOTERS = 6


def test_concurrent_votes_are_each_counted_once_and_activate_once(cast, dashboard) -> None:
    devices = [Device(f"approver-{index}") for index in range(VOTERS)]
    for device in devices:
        approver_key_register(org=cast.acme, public_key=device.public, key_id=device.name)
    org_set_policy_quorum(org=cast.acme, quorum=VOTERS - 1)
    body = dashboard("manager").post("/v1/policy", {"toml": ALLOW_SEARCH}, format="json").json()
    tokens = [device.token(body["statement"]) for device in devices]
    clients = []
    for _ in devices:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
        clients.append(client)

    def cast_vote(index: int) -> int:
        try:
            response = clients[index].post(
                f"/v1/policy/proposals/{body['policy_id']}/votes",
                {"token_b64": tokens[index]},
                format="json",
            )
            return response.status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=VOTERS) as pool:
        statuses = list(pool.map(cast_vote, range(VOTERS)))

    # k of them counted; the last to take the lock finds the proposal activated.
    assert sorted(statuses) == [HTTPStatus.OK] * (VOTERS - 1) + [HTTPStatus.CONFLICT]
    proposal = PolicyProposal.objects.get()
    assert proposal.status == ProposalStatus.ACTIVATED
    assert proposal.approved_count == VOTERS - 1
    assert proposal.votes.count() == VOTERS - 1
    assert PolicyDeployment.objects.filter(org=cast.acme).count() == 1
