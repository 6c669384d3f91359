"""Interoperability: receipts the real SDK and the reference vectors produced, over HTTP."""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path

import pytest

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from apps.receipts.verifier import verify_receipt

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parents[1] / "data"
SDK_SESSIONS = sorted((DATA / "sdk").glob("*.jsonl"))


def _vector_receipts() -> list[tuple[str, str]]:
    cases = []
    for name in (
        "receipts_valid",
        "receipts_invalid",
        "decoding_quirks",
        "ed25519_edge",
        "lifecycle",
    ):
        for case in json.loads((DATA / "vectors" / f"{name}.json").read_text())["cases"]:
            cases.append((f"{name}:{case['name']}", case["inputs"]["receipt_json"]))
    return cases


@pytest.mark.parametrize("session", SDK_SESSIONS, ids=lambda path: path.stem)
def test_sdk_sessions_are_mirrored_in_order(push, cast, session):
    lines = session.read_text().splitlines()
    seqs = []
    for line in lines:
        response = push(line)
        assert response.status_code == HTTPStatus.CREATED, response.json()
        seqs.append(response.json()["seq"])
    assert seqs == list(range(1, len(lines) + 1))
    for line in lines:
        assert push(line).json()["status"] == "duplicate"
    assert mirror_chain_check(org=cast.acme).ok


@pytest.mark.parametrize(("case", "receipt_text"), _vector_receipts(), ids=lambda v: v[:60])
def test_vector_receipts_get_the_status_their_verdict_maps_to(push, case, receipt_text):
    verdict = verify_receipt(receipt_text)
    response = push(receipt_text)
    if verdict.is_valid:
        assert response.status_code == HTTPStatus.CREATED
        assert response.json()["entry_hash"] == json.loads(receipt_text)["content"]["action_hash"]
    elif verdict.stage == "decode":
        # Either the receipt fails to decode (kind Malformed) or the body around it is not
        # a push at all (not JSON, receipt/content not objects): 422 with a detail both ways.
        assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
        assert response.json().get("kind", "Malformed") == "Malformed"
        assert isinstance(response.json()["detail"], str)
    else:
        assert response.status_code == HTTPStatus.CONFLICT
        assert response.json()["kind"] == verdict.kind
        assert not MirrorEntry.objects.exists()
