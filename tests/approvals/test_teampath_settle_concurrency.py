"""Concurrent settle attempts on one team-path approval (PostgreSQL): exactly one wins."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

import pytest
from django.db import connection

from apps.approvals.models import Approval, ApprovalVote
from apps.approvals.services import approver_key_register
from tests.approvals.conftest import Approver, suspended_receipt
from tests.approvals.test_teampath_approvals_api import SCOPE, open_approval, submit
from tests.teampath_fixtures import TeamPathCaller

pytestmark = [
    pytest.mark.urls("config.urls.teampath"),
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("teampath_profile"),
]

APPROVERS = 6


@pytest.mark.parametrize("decisions", ["approved", "mixed"])
def test_racing_tokens_settle_the_approval_exactly_once(cast, agent, decisions):
    team = [Approver(f"a{index}") for index in range(APPROVERS)]
    for approver in team:
        approver_key_register(org=cast.acme, public_key=approver.public, key_id=approver.name)
    receipt = suspended_receipt(agent)
    opened = open_approval(TeamPathCaller(cast.acme_key.secret), receipt)
    assert opened.status_code == HTTPStatus.CREATED
    approval_id = opened.json()["approvalId"]
    content = receipt["content"]
    tokens = [
        approver.token(
            content,
            scope=SCOPE,
            decision="rejected" if decisions == "mixed" and index % 2 else "approved",
        )
        for index, approver in enumerate(team)
    ]

    def settle(token: str) -> tuple[int, str]:
        try:
            answer = submit(TeamPathCaller(cast.acme_key.secret), approval_id, token)
            return answer.status_code, answer.json().get("outcome") or answer.json().get("error")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=APPROVERS) as pool:
        answers = list(pool.map(settle, tokens))

    winners = [answer for answer in answers if answer[0] == HTTPStatus.OK]
    assert len(winners) == 1
    assert sorted(answers).count((HTTPStatus.CONFLICT, "approval_settled")) == APPROVERS - 1
    approval = Approval.objects.get(approval_id=approval_id)
    assert approval.status == winners[0][1]
    assert ApprovalVote.objects.filter(approval=approval).count() == 1
    assert approval.events.filter(kind="resolved").count() == 1
