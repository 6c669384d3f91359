"""Receipts whose ``workflow``, ``agent_identity``, ``rule_id``, ``tool_name`` or
``session_id`` is longer than the mirror's 200-character lookup columns: every push route
stores them, and stores
the same row whichever route it came through (the batch never answers 500 for them, never
loses the batch's other receipts)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.receipts.columns import indexed_text
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent
from tests.teampath_fixtures import TeamPathCaller

LONG = "x" * 150 + "é" * 100  # 250 characters, multi-byte in UTF-8
COLUMNS = ["workflow", "agent_identity", "rule_id", "tool_name", "session_id"]


def long_receipt(agent: Agent, field: str) -> dict[str, Any]:
    """A valid receipt whose ``field`` is 250 characters long."""
    content = agent.content()
    if field == "workflow":
        content["action"] = {**content["action"], "workflow": LONG + "-workflow"}
    elif field == "tool_name":
        content["action"] = {**content["action"], "tool_name": LONG + "-tool"}
    elif field == "rule_id":
        content["policy"] = {**content["policy"], "rule_id": LONG + "-rule"}
    elif field == "session_id":
        content.update(session_id=LONG + "-session", seq=0)
    else:
        # The content's agent_identity is free text to the verifier: the operator key
        # signs the envelope (receipts.md §8).
        content["agent_identity"] = LONG + "-agent"
    return agent.sign(content)


def stored_row(org: Any, receipt: dict[str, Any]) -> dict[str, Any]:
    columns = ["receipt", "kind", "trust_level", "session_seq", "link_hash", *COLUMNS]
    return dict(
        MirrorEntry.objects.filter(org=org, action_hash=receipt["content"]["action_hash"])
        .values(*columns)
        .get()
    )


def test_a_long_value_is_kept_whole_when_it_fits_and_bounded_and_distinct_when_not():
    assert indexed_text("short") == "short"
    assert indexed_text("y" * 200) == "y" * 200
    bounded = indexed_text(LONG + "a")
    assert len(bounded) == 200
    assert bounded.startswith(LONG[:100])
    assert indexed_text(LONG + "b") != bounded  # two long values sharing a prefix stay apart


@pytest.mark.django_db
@pytest.mark.urls("config.urls.teampath")
@pytest.mark.usefixtures("teampath_profile")
def test_a_teampath_batch_with_long_values_stores_them_beside_the_good_receipts(
    cast, agent, caplog
):
    acme, globex = TeamPathCaller(cast.acme_key.secret), TeamPathCaller(cast.globex_key.secret)
    long_ones = [long_receipt(agent, field) for field in COLUMNS]
    good = [agent.receipt() for _ in range(3)]
    batch = [good[0], *long_ones[:2], good[1], *long_ones[2:], good[2]]

    response = acme.batch(batch)

    assert response.status_code == HTTPStatus.OK, response.content
    assert [result["accepted"] for result in response.json()] == [True] * len(batch)
    assert not [record for record in caplog.records if record.levelname == "ERROR"]
    assert MirrorEntry.objects.filter(org=cast.acme).count() == len(batch)
    assert mirror_chain_check(org=cast.acme).ok
    # The same receipts pushed one by one (another org) are stored as the same rows.
    for receipt in long_ones:
        assert globex.push(receipt).status_code == HTTPStatus.CREATED
    for receipt in long_ones:
        assert stored_row(cast.acme, receipt) == stored_row(cast.globex, receipt)


@pytest.mark.django_db
@pytest.mark.parametrize("field", COLUMNS)
def test_a_keyscoped_push_with_a_long_value_stores_it_bounded(cast, agent, push, field):
    receipt = long_receipt(agent, field)
    assert push(receipt).status_code == HTTPStatus.CREATED
    row = stored_row(cast.acme, receipt)
    long_value = {
        "workflow": receipt["content"]["action"]["workflow"],
        "rule_id": receipt["content"]["policy"]["rule_id"],
        "tool_name": receipt["content"]["action"]["tool_name"],
        "session_id": receipt["content"].get("session_id", ""),
        "agent_identity": receipt["content"]["agent_identity"],
    }[field]
    assert row[field] == indexed_text(long_value)


@pytest.mark.django_db
@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
def test_a_session_with_a_long_id_keeps_its_continuity_on_every_route(
    cast, agent, settings, profile
):
    """Continuity (server.md §5) is checked against the stored, bounded session id: a fork
    of a long-id session is refused, a session sharing only its first 200 characters is
    another session."""
    settings.ROOT_URLCONF = f"config.urls.{profile}"
    settings.API_PROFILE = profile
    session = LONG + "-one"
    chain = agent.session(session, 2)
    fork = agent.session(session, 2)[1]
    neighbour = agent.session(LONG + "-two", 2)
    if profile == "keyscoped":
        pusher = Pusher(APIClient(), cast.acme_key.secret)
        codes = [pusher(receipt).status_code for receipt in [*chain, fork, *neighbour]]
    else:
        caller = TeamPathCaller(cast.acme_key.secret)
        codes = [caller.push(receipt).status_code for receipt in [*chain, fork]]
        codes += [
            HTTPStatus.CREATED if result["accepted"] else HTTPStatus.CONFLICT
            for result in caller.batch(neighbour).json()
        ]
    assert codes == [201, 201, HTTPStatus.CONFLICT, 201, 201]


@pytest.mark.django_db
@pytest.mark.urls("config.urls.teampath")
@pytest.mark.usefixtures("teampath_profile")
def test_a_fork_of_a_long_id_session_inside_one_batch_is_refused_in_its_slot(cast, agent):
    acme = TeamPathCaller(cast.acme_key.secret)
    session = LONG + "-batch"
    chain = agent.session(session, 2)
    fork = agent.session(session, 2)[1]
    results = acme.batch([*chain, fork]).json()
    assert [result["accepted"] for result in results] == [True, True, False]
    assert "fork" in results[2]["rejectionReason"]
