"""U+0000 (NUL) in a signed receipt, as server.md §1 decides.

A NUL in a member name or string outside the free-form ``action.fields`` object makes the
receipt Malformed at decode: key-scoped 422, team-path 400, and in a team-path batch a
refusal of that position only. Inside ``fields`` it is kept verbatim: the stored JCS text
escapes it as ``\\u0000``, PostgreSQL stores it, and the chain check, the chain view and the
evidence export all still work. Each case is signed correctly, so the NUL is its only fault.
"""

from __future__ import annotations

import io
import itertools
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pytest

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from apps.receipts.verifier import verify_receipt
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TeamPathCaller

NUL_REFUSED = "U+0000 (NUL) is not allowed outside action.fields"


def _at(*path: Any, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(content: dict[str, Any]) -> None:
        target = content
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


@dataclass(frozen=True)
class NulCase:
    name: str
    change: Callable[[dict[str, Any]], None]
    refused_at: str | None  # the decoder's path of the refusal; None: accepted

    def receipt(self, agent: Agent) -> dict[str, Any]:
        content = agent.content()
        self.change(content)
        return agent.sign(content)


REFUSED = [
    NulCase("workflow", _at("action", "workflow", value="ops\0nightly"), "content.action.workflow"),
    NulCase(
        "session_id",
        lambda content: content.update(session_id="s-\0", seq=0),
        "content.session_id",
    ),
    NulCase("policy.rule_id", _at("policy", "rule_id", value="tool\0"), "content.policy.rule_id"),
    NulCase("tool_name", _at("action", "tool_name", value="\0"), "content.action.tool_name"),
    NulCase("captured_at", _at("captured_at", value="2026\0"), "content.captured_at"),
    NulCase(
        "a matched condition's free-form value",
        _at("policy", "matched_conditions", 0, "value", value="tool\0call"),
        "content.policy.matched_conditions[0].value",
    ),
    NulCase(
        "a member name inside a matched condition's value",
        _at("policy", "matched_conditions", 0, "value", value={"a\0b": 1}),
        "content.policy.matched_conditions[0].value.a\0b",
    ),
]
ACCEPTED = [
    NulCase("a string in fields", _at("action", "fields", value={"q": "a\0b"}), None),
    NulCase("a member name in fields", _at("action", "fields", value={"a\0b": "v"}), None),
    NulCase(
        "deep inside fields",
        _at("action", "fields", value={"x": [{"y\0": ["\0", {"z": "\0\0"}]}]}),
        None,
    ),
]


def ids(cases: list[NulCase]) -> list[str]:
    return [case.name for case in cases]


# --- The verifier (vector style) ---------------------------------------------------------


@pytest.mark.parametrize("case", REFUSED, ids=ids(REFUSED))
def test_the_verifier_finds_a_nul_outside_fields_malformed(case: NulCase) -> None:
    verdict = verify_receipt(as_text(case.receipt(Agent())))
    assert (verdict.kind, verdict.stage) == ("Malformed", "decode")
    assert verdict.detail == (
        f"input is not a well-formed action receipt: receipt.{case.refused_at}: {NUL_REFUSED}"
    )


@pytest.mark.parametrize("case", ACCEPTED, ids=ids(ACCEPTED))
def test_the_verifier_keeps_a_nul_inside_fields(case: NulCase) -> None:
    text = as_text(case.receipt(Agent()))
    assert "\\u0000" in text  # json.dumps escapes it, as every JSON encoder must
    verdict = verify_receipt(text)
    assert verdict.kind == "Valid", verdict.detail
    assert verdict.receipt is not None
    assert b"\\u0000" in verdict.receipt.canonical_bytes


def test_a_nul_in_a_signature_entry_is_malformed_too() -> None:
    receipt = Agent().receipt()
    receipt["signatures"][0]["key_id"] = "op\0"
    verdict = verify_receipt(as_text(receipt))
    assert verdict.kind == "Malformed"
    assert verdict.detail is not None
    assert verdict.detail.endswith(f"receipt.signatures[0].key_id: {NUL_REFUSED}")


# --- Key-scoped ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", REFUSED, ids=ids(REFUSED))
def test_key_scoped_push_refuses_it_422_malformed(case: NulCase, push, cast) -> None:
    response = push(case.receipt(Agent()))
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    body = response.json()
    assert body["kind"] == "Malformed"
    assert NUL_REFUSED in body["detail"]
    assert not MirrorEntry.objects.filter(org=cast.acme).exists()


def test_key_scoped_push_stores_a_nul_inside_fields_and_everything_reads_it(
    push, cast, dashboard
) -> None:
    agent = Agent()
    receipts = [case.receipt(agent) for case in ACCEPTED]
    for receipt in receipts:
        response = push(receipt)
        assert response.status_code == HTTPStatus.CREATED, response.json()
    # PostgreSQL text holds the escaped form; reading it back gives the NUL again.
    stored = MirrorEntry.objects.get(
        org=cast.acme, action_hash=receipts[0]["content"]["action_hash"]
    ).receipt
    assert "\\u0000" in stored
    assert "\0" not in stored
    assert json.loads(stored)["content"]["action"]["fields"] == {"q": "a\0b"}
    # A duplicate push of the same bytes is recognized as such.
    assert push(receipts[0]).status_code == HTTPStatus.OK
    assert mirror_chain_check(org=cast.acme).ok
    window = dashboard("auditor").get("/v1/audit/chain")
    assert window.status_code == HTTPStatus.OK
    assert window.json()["size"] == len(receipts)
    export = dashboard("auditor").post("/v1/evidence/export", {}, format="json")
    assert export.status_code == HTTPStatus.OK
    files = _unpack(export)
    lines = files["receipts.jsonl"].decode().splitlines()
    assert len(lines) == len(receipts)
    assert all(verify_receipt(line).kind == "Valid" for line in lines)
    assert "\\u0000" in files["receipts.jsonl"].decode()


def test_submit_token_refuses_action_content_with_a_nul_outside_fields(cast, sdk_client) -> None:
    content = REFUSED[0].receipt(Agent())["content"]
    response = sdk_client.post(
        f"/v1/approvals/{content['action_hash']}/submit-token",
        {"token_b64": "AAAA", "action_content": content},
        format="json",
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert NUL_REFUSED in response.json()["detail"]


def _unpack(response: Any) -> dict[str, bytes]:
    data = (
        b"".join(response.streaming_content)
        if getattr(response, "streaming", False)
        else response.content
    )
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {
            member.name.split("/", 1)[1]: tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar.getmembers()
            if member.isfile()
        }


@pytest.fixture
def sdk_client(cast: Any) -> Any:
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    return client


# --- Team-path ----------------------------------------------------------------------------


@pytest.fixture
def acme(cast: Any, settings: Any) -> TeamPathCaller:
    settings.API_PROFILE = "teampath"
    return TeamPathCaller(cast.acme_key.secret)


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.parametrize("case", REFUSED, ids=ids(REFUSED))
def test_team_path_push_refuses_it_400_with_the_reason(case: NulCase, acme, cast) -> None:
    receipt = case.receipt(Agent())
    response = acme.push(receipt)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    body = response.json()
    assert body["error"] == "validation_failed"
    assert body["accepted"] is False
    assert body["receiptId"] == receipt["content"]["action_hash"]
    assert body["rejectionReason"].startswith("Malformed: ")
    assert NUL_REFUSED in body["rejectionReason"]


@pytest.mark.urls("config.urls.teampath")
def test_a_team_path_batch_refuses_only_the_receipts_with_a_nul_outside_fields(acme, cast) -> None:
    agent = Agent()
    pairs = itertools.zip_longest(REFUSED, ACCEPTED)
    cases = [case for pair in pairs for case in pair if case is not None]
    receipts = [case.receipt(agent) for case in cases]
    response = acme.batch(receipts)
    assert response.status_code == HTTPStatus.OK
    results = response.json()
    assert [result["receiptId"] for result in results] == [
        receipt["content"]["action_hash"] for receipt in receipts
    ]
    for case, result in zip(cases, results, strict=True):
        if case.refused_at is None:
            assert result["accepted"] is True, (case.name, result)
        else:
            assert result["accepted"] is False, case.name
            assert result["rejectionReason"].startswith("Malformed: ")
            assert NUL_REFUSED in result["rejectionReason"]
    stored = MirrorEntry.objects.filter(org=cast.acme).count()
    assert stored == sum(1 for case in cases if case.refused_at is None)
    assert mirror_chain_check(org=cast.acme).ok
