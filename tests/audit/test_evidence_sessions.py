"""Evidence export: agent sessions checkable as chains, approval legs verbatim, windows
that start mid-chain still recompute to the head."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from http import HTTPStatus
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.approvals.services import approval_vote
from apps.receipts.mirror_chain import chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_chain
from apps.receipts.verifier.chain import link_hash
from tests.approvals.conftest import Approver
from tests.audit.test_evidence_export import unpack
from tests.receipts.factories import Agent

REVIEW = {
    "rule_id": "payments.review",
    "rule_display": "When any agent performs payment, then require approval.",
    "matched_conditions": [{"field": "verb", "op": "eq", "value": "payment"}],
    "decision_path": "require_approval",
}


@pytest.fixture
def session(cast, push) -> dict:
    """Session s1: seq 0, seq 1 routed to a human and approved (an L1 superseding it), seq 2
    linked to the approved form; plus a receipt outside any session."""
    from apps.approvals.services import approver_key_register

    agent, alice = Agent(), Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    first = agent.receipt(session_id="s1", seq=0)
    suspended = agent.receipt(
        session_id="s1", seq=1, prev_receipt_hash=link_hash(first["content"]), policy=REVIEW
    )
    for receipt in (first, suspended):
        assert push(receipt).status_code == HTTPStatus.CREATED
    content = suspended["content"]
    record, co_sig = alice.leg(content)
    approval_vote(
        org=cast.acme,
        action_hash=content["action_hash"],
        token=base64.b64decode(alice.token(content, scope=REVIEW["rule_id"])),
        action_content=content,
        record=record,
        co_sig_b64=co_sig,
    )
    l1 = agent.approve_l1(suspended, alice.key)
    assert push(l1, supersedes=content["action_hash"]).status_code == HTTPStatus.CREATED
    last = agent.receipt(session_id="s1", seq=2, prev_receipt_hash=link_hash(l1["content"]))
    loose = agent.receipt()
    for receipt in (last, loose):
        assert push(receipt).status_code == HTTPStatus.CREATED
    return {"chain": [first, l1, last], "suspended": suspended, "record": record,
            "co_sig": co_sig, "alice": alice}  # fmt: skip


def test_a_complete_session_is_a_chain_file_that_verifies(cast, dashboard, session, tmp_path):
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {}, format="json"))
    assert json.loads(files["sessions.json"]) == [
        {"session_id": "s1", "receipts": 3, "first_seq": 0, "last_seq": 2,
         "file": "sessions/0001.jsonl"}
    ]  # fmt: skip
    lines = files["sessions/0001.jsonl"].decode().splitlines()
    assert [json.loads(line)["content"]["action_hash"] for line in lines] == [
        receipt["content"]["action_hash"] for receipt in session["chain"]
    ]
    assert verify_chain(lines) == {"kind": "Valid", "length": 3}
    manifest = json.loads(files["manifest.json"])
    assert "sessions/0001.jsonl" in manifest["files"]
    chain_file = tmp_path / "s1.jsonl"
    chain_file.write_bytes(files["sessions/0001.jsonl"])
    out = StringIO()
    call_command("verify_receipts", str(chain_file), "--chain", stdout=out)
    assert json.loads(out.getvalue().splitlines()[-1])["kind"] == "Valid"


def test_the_approval_leg_is_exported_verbatim(cast, dashboard, session) -> None:
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {}, format="json"))
    (approval,) = json.loads(files["approvals.json"])
    assert approval["action_hash"] == session["suspended"]["content"]["action_hash"]
    assert approval["status"] == "approved"
    (vote,) = approval["votes"]
    assert vote["approver_public_key"] == session["alice"].public
    assert vote["leg"] == {"record": session["record"], "co_sig_b64": session["co_sig"]}
    keys = json.loads(files["approver_keys.json"])
    assert [(key["key_id"], key["revoked_at"]) for key in keys] == [("alice", None)]


def test_a_window_that_starts_mid_chain_recomputes_to_the_head(cast, dashboard, session):
    MirrorEntry.objects.filter(org=cast.acme, seq__lte=2).update(
        received_at=timezone.now() - timedelta(days=3)
    )
    today = timezone.now().date().isoformat()
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {"from": today}, format="json"))
    chain = json.loads(files["chain.json"])
    entries = chain["entries"][::-1]
    assert [entry["seq"] for entry in entries] == [3, 4, 5]
    running = entries[0]["prev_chain_hash"]
    for entry in entries:
        assert entry["prev_chain_hash"] == running
        assert entry["receipt_digest"] == receipt_digest(entry["receipt"])
        running = chain_hash(
            prev_chain_hash=running,
            seq=entry["seq"],
            action_hash=entry["action_hash"],
            receipt_digest_hex=entry["receipt_digest"],
            supersedes_action_hash=entry["supersedes_action_hash"] or "",
        )
        assert running == entry["chain_hash"]
    assert (chain["head"], chain["size"]) == (running, 5)
    # The session started before the window: listed, but no chain file to check.
    (listed,) = json.loads(files["sessions.json"])
    assert (listed["first_seq"], listed["file"]) == (1, None)
    assert not any(name.startswith("sessions/") for name in files)


def test_verify_md_explains_every_offline_check(cast, dashboard, session) -> None:
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {}, format="json"))
    guide = files["VERIFY.md"].decode()
    for needle in ("verify_receipts receipts.jsonl", "verify_receipts --chain", "/verify",
                   "manifest.json", "chain_hash", "approver_keys.json"):  # fmt: skip
        assert needle in guide
