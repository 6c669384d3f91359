"""The /verify page checks a receipt's transparency[] proofs in the browser as the Python
verifier does (transparency.md §7): every verify_proof vector, then a real proof."""

from __future__ import annotations

import json
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.transparency.services import transparency_publish_epoch
from tests.receipts.factories import Agent, as_text

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "vectors" / "transparency.json").read_text()
)


def test_every_proof_vector_gets_the_references_verdict(verifier: Any) -> None:
    cases = [case for case in VECTORS["cases"] if case["op"] == "verify_proof"]
    verdicts = verifier.evaluate(
        """async (cases) => { const out = []; for (const c of cases) out.push(
             await window.mirrorVerifyTransparencyProof(c.action_hash, c.proof, c.origin,
               c.witness_keys, c.required_cosignatures, c.org_id)); return out; }""",
        [{**case["inputs"], "proof": json.dumps(case["inputs"]["proof"])} for case in cases],
    )
    problems = {
        case["name"]: verdict
        for case, verdict in zip(cases, verdicts, strict=True)
        if verdict["valid"] is not case["expected"]["valid"]
        or (not verdict["valid"] and verdict["reason"] != case["expected"]["reason"])
    }
    assert problems == {}
    assert verifier.requests == []  # nothing left the page


@pytest.mark.django_db(transaction=True)
def test_a_mirrored_receipts_proof_is_checked_on_the_page(
    verifier: Any, cast: Any, push: Any
) -> None:
    receipt = Agent().receipt()
    assert push(receipt).status_code == HTTPStatus.CREATED
    transparency_publish_epoch()
    answer = APIClient().get(
        f"/v1/receipts/{receipt['content']['action_hash']}/proof",
        HTTP_X_API_KEY=cast.acme_key.secret,
    )
    proof = answer.json()
    text = as_text({**receipt, "transparency": [proof]})
    verifier.click("#tlog summary")
    verifier.fill("#tlog-origin", "localhost/v1/log")
    verifier.fill("#tlog-required", "0")
    verifier.fill("#input", text)
    verifier.click("#verify")
    verifier.wait_for_selector("[data-tlog]")
    assert verifier.get_attribute("[data-tlog]", "data-tlog") == "valid"
    verifier.fill("#tlog-org", "olog_aaaaaaaaaaaaaaaaaaaaaaaaaa")
    verifier.click("#verify")
    verifier.wait_for_selector("[data-tlog='wrong_org']")
    verifier.fill("#tlog-org", "")
    verifier.fill("#tlog-origin", "another.example/v1/log")
    verifier.click("#verify")
    verifier.wait_for_selector("[data-tlog='wrong_log']")
