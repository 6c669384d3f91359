"""Receipts the real heso wheel assembled from this service's relayed parts are accepted."""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path

import pytest

from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_receipt
from tests.receipts.factories import as_text

DATA = json.loads(
    (Path(__file__).parents[1] / "data" / "sdk" / "approvals_interop.json").read_text()
)


@pytest.mark.parametrize("lane", ["single", "quorum"])
def test_a_wheel_assembled_l1_supersedes_its_suspended_entry(cast, push, lane) -> None:
    case = DATA[lane]
    suspended, l1 = case["suspended"], case["l1"]
    assert verify_receipt(as_text(l1)).trust_level == "L1"
    assert push(suspended).status_code == HTTPStatus.CREATED
    response = push(l1, supersedes=suspended["content"]["action_hash"])
    assert response.status_code == HTTPStatus.CREATED, response.json()
    old = MirrorEntry.objects.get(org=cast.acme, action_hash=suspended["content"]["action_hash"])
    assert old.superseded_by == l1["content"]["action_hash"]
    if lane == "quorum":
        assert l1["content"]["multi_approval"]["threshold"] == case["threshold"]
