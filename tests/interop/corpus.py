"""The heso 0.5.1 interop corpus (tests/data/sdk/corpus.json) and the routes that push it.

Three routes mirror receipts: key-scoped ``POST /v1/receipts``, team-path
``POST /v1/receipts`` (the receipt as body) and team-path ``POST /v1/receipts/batch``. Each
route checks the status code and the answer shape of its profile and hands back the
answers in one form (:class:`Answer`), so a test states what it expects once for all three.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from rest_framework.test import APIClient

from apps.approvals.services import approver_key_register, approver_key_revoke
from apps.tenancy.models import Org
from tests.receipts.conftest import Pusher
from tests.receipts.factories import as_text
from tests.teampath_fixtures import TeamPathCaller

CORPUS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "sdk" / "corpus.json").read_text()
)
FLOWS: dict[str, dict[str, Any]] = {flow["name"]: flow for flow in CORPUS["flows"]}
DECISION_KEY: str = CORPUS["decision_key"]["configured"]["public_key"]
PLACEHOLDER_KEY: str = CORPUS["decision_key"]["insecure_placeholder"]["public_key"]
DECISION_KINDS = ("approved", "denied", "expired")
# The gated sessions signed by the configured decision key, and the one signed by the
# public placeholder key.
GATED_FLOWS = tuple(CORPUS["decision_key"]["configured"]["used_by"])
PLACEHOLDER_FLOW: str = CORPUS["decision_key"]["insecure_placeholder"]["used_by"][0]


@dataclass(frozen=True)
class Pushed:
    """One corpus receipt and the notes the SDK run recorded about it."""

    flow: str
    receipt: dict[str, Any]
    note: dict[str, Any]

    @property
    def action_hash(self) -> str:
        return str(self.receipt["content"]["action_hash"])

    @property
    def kind(self) -> str:
        return str(self.note["kind"])

    @property
    def claim(self) -> str:
        return str(self.receipt["content"]["trust_level"])

    def level(self, *, decision_key_active: bool) -> str:
        """The level server.md §1 derives, as the corpus notes state it."""
        if "server_trust_level" in self.note:
            return str(self.note["server_trust_level"])
        suffix = "registered" if decision_key_active else "not_registered"
        return str(self.note[f"server_trust_level_if_signer_{suffix}"])

    def claimed(self, *, decision_key_active: bool) -> str | None:
        """The claim as reported beside the derived level: only where they differ."""
        level = self.level(decision_key_active=decision_key_active)
        return self.claim if self.claim != level else None


def flow_receipts(name: str) -> list[Pushed]:
    flow = FLOWS[name]
    assert len(flow["receipts"]) == len(flow["notes"]["per_receipt"])
    return [
        Pushed(name, receipt, note)
        for receipt, note in zip(flow["receipts"], flow["notes"]["per_receipt"], strict=True)
    ]


def all_flow_receipts() -> list[Pushed]:
    """Every flow's receipts, flows in corpus order and each flow in its push order."""
    return [pushed for flow in CORPUS["flows"] for pushed in flow_receipts(flow["name"])]


def decision_link(name: str) -> Pushed:
    (link,) = [pushed for pushed in flow_receipts(name) if pushed.kind in DECISION_KINDS]
    return link


@dataclass(frozen=True)
class Answer:
    """A push answer in one form for every route.

    ``new``: appended (True) or a duplicate (False); None where the route does not say
    (a batch result). ``seq``: only key-scoped answers carry it.
    """

    action_hash: str
    new: bool | None
    seq: int | None
    trust_level: str
    claimed_trust_level: str | None


class KeyScopedRoute:
    name = "key-scoped"
    reports_seq = True

    def __init__(self, secret: str) -> None:
        self.pusher = Pusher(APIClient(), secret)

    def push(self, receipts: list[dict[str, Any]]) -> list[Answer]:
        return [self._one(receipt) for receipt in receipts]

    def _one(self, receipt: dict[str, Any]) -> Answer:
        response = self.pusher(receipt)
        assert response.status_code in (HTTPStatus.CREATED, HTTPStatus.OK), response.json()
        body = response.json()
        assert set(body) <= {"status", "entry_hash", "seq", "trust_level", "claimed_trust_level"}
        new = response.status_code == HTTPStatus.CREATED
        assert body["status"] == ("appended" if new else "duplicate")
        return Answer(
            action_hash=body["entry_hash"],
            new=new,
            seq=body["seq"],
            trust_level=body["trust_level"],
            claimed_trust_level=body.get("claimed_trust_level"),
        )


def outbox_answer(result: dict[str, Any], new: bool | None) -> Answer:
    """A team-path ``OutboxPushResult`` of a stored receipt."""
    assert set(result) <= {"receiptId", "accepted", "trustLevel", "claimedTrustLevel"}, result
    assert result["accepted"] is True, result
    return Answer(
        action_hash=result["receiptId"],
        new=new,
        seq=None,
        trust_level=result["trustLevel"],
        claimed_trust_level=result.get("claimedTrustLevel"),
    )


class TeamPathRoute:
    name = "team-path"
    reports_seq = False

    def __init__(self, secret: str) -> None:
        self.caller = TeamPathCaller(secret)

    def push(self, receipts: list[dict[str, Any]]) -> list[Answer]:
        answers = []
        for receipt in receipts:
            response = self.caller.push(receipt)
            assert response.status_code in (HTTPStatus.CREATED, HTTPStatus.OK), response.json()
            new = response.status_code == HTTPStatus.CREATED
            answers.append(outbox_answer(response.json(), new))
        return answers


class TeamPathBatchRoute(TeamPathRoute):
    """All receipts given in one ``{"receipts": [...]}`` request (a client's outbox)."""

    name = "team-path batch"

    def push(self, receipts: list[dict[str, Any]]) -> list[Answer]:
        response = self.caller.batch(receipts)
        assert response.status_code == HTTPStatus.OK, response.json()
        results = response.json()
        assert len(results) == len(receipts)
        return [outbox_answer(result, None) for result in results]


Route = KeyScopedRoute | TeamPathRoute


def push_flow(route: Route, name: str) -> list[Answer]:
    """Push one corpus flow, in order, as one call of the route (one batch for a batch)."""
    return route.push([pushed.receipt for pushed in flow_receipts(name)])


def register_decision_key(org: Org) -> None:
    approver_key_register(org=org, public_key=DECISION_KEY, key_id="gated-decision")


def revoke_decision_key(org: Org) -> None:
    approver_key_revoke(org=org, key_id="gated-decision")


def json_lines(receipts: list[dict[str, Any]]) -> bytes:
    return "".join(as_text(receipt) + "\n" for receipt in receipts).encode("utf-8")
