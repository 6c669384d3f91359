"""Evidence export: the tar an auditor checks offline (API and command, one service)."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import typing
from collections.abc import Iterator
from datetime import timedelta
from http import HTTPStatus
from pathlib import Path

import pytest
from blake3 import blake3
from django.core.management import call_command
from django.http import HttpResponseBase, StreamingHttpResponse
from django.utils import timezone
from rest_framework.test import APIClient

from apps.approvals.services import approval_open, approver_key_register
from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_receipt
from tests.approvals.conftest import Approver
from tests.receipts.factories import Agent

ROOT = Path(__file__).resolve().parents[2]


def streamed(response: HttpResponseBase) -> bytes:
    """The body of a streamed answer (the export is never built in memory)."""
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(typing.cast(Iterator[bytes], response.streaming_content))


def unpack(archive: bytes | HttpResponseBase) -> dict[str, bytes]:
    if isinstance(archive, HttpResponseBase):
        archive = streamed(archive)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {
            member.name.split("/", 1)[1]: tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar.getmembers()
        }


@pytest.fixture
def mirrored(cast, push) -> list[dict]:
    agent = Agent()
    approver = Approver("alice")
    approver_key_register(org=cast.acme, public_key=approver.public, key_id="alice")
    receipts = [agent.receipt() for _ in range(3)]
    for receipt in receipts:
        assert push(receipt).status_code == HTTPStatus.CREATED
    suspended = receipts[1]
    approval_open(org=cast.acme, action_hash=suspended["content"]["action_hash"], rule_id="r")
    l1 = agent.approve_l1(suspended, approver.key)
    assert push(l1, supersedes=suspended["content"]["action_hash"]).status_code == 201
    return [*receipts, l1]


def test_the_export_holds_every_file_and_the_manifest_hashes_them(cast, dashboard, mirrored):
    response = dashboard("auditor").post("/v1/evidence/export", {}, format="json")
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"] == "application/x-tar"
    assert "evidence-acme.tar" in response["Content-Disposition"]
    files = unpack(response)
    assert set(files) == {
        "manifest.json", "receipts.jsonl", "chain.json", "approvals.json",
        "approver_keys.json", "policy_approvals.json", "sessions.json", "VERIFY.md",
    }  # fmt: skip
    manifest = json.loads(files["manifest.json"])
    assert (manifest["org"], manifest["receipts"]) == ("acme", 4)
    for name, facts in manifest["files"].items():
        assert facts["bytes"] == len(files[name])
        assert facts["sha256"] == hashlib.sha256(files[name]).hexdigest()
        assert facts["blake3"] == blake3(files[name]).hexdigest()


def test_receipts_verify_and_the_chain_recomputes_from_the_archive_alone(dashboard, mirrored):
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {}, format="json"))
    lines = files["receipts.jsonl"].decode().splitlines()
    assert [verify_receipt(line).kind for line in lines] == ["Valid"] * 4
    assert [json.loads(line)["content"]["action_hash"] for line in lines] == [
        receipt["content"]["action_hash"] for receipt in mirrored
    ]
    chain = json.loads(files["chain.json"])
    prev = EMPTY_CHAIN_HEAD
    for entry in reversed(chain["entries"]):
        assert entry["receipt_digest"] == receipt_digest(entry["receipt"])
        assert entry["chain_hash"] == chain_hash(
            prev_chain_hash=prev,
            seq=entry["seq"],
            action_hash=entry["action_hash"],
            receipt_digest_hex=entry["receipt_digest"],
            supersedes_action_hash=entry["supersedes_action_hash"] or "",
        )
        prev = entry["chain_hash"]
    assert chain["head"] == prev
    assert chain["size"] == 4


def test_approvals_and_keys_in_force_are_included(cast, dashboard, mirrored) -> None:
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {}, format="json"))
    keys = json.loads(files["approver_keys.json"])
    assert [key["key_id"] for key in keys] == ["alice"]
    approvals = json.loads(files["approvals.json"])
    assert [(a["action_hash"], a["threshold"], a["rule_id"]) for a in approvals] == [
        (mirrored[1]["content"]["action_hash"], 1, "r")
    ]
    assert approvals[0]["roster"] == [keys[0]["public_key"]]
    assert approvals[0]["history"][0]["kind"] == "opened"


def test_the_window_selects_receipts_by_day(cast, dashboard, mirrored) -> None:
    MirrorEntry.objects.filter(org=cast.acme, seq__lte=2).update(
        received_at=timezone.now() - timedelta(days=10)
    )
    today = timezone.now().date().isoformat()
    files = unpack(dashboard("auditor").post("/v1/evidence/export", {"from": today}, format="json"))
    manifest = json.loads(files["manifest.json"])
    assert (manifest["receipts"], manifest["first_seq"], manifest["last_seq"]) == (2, 3, 4)


@pytest.mark.parametrize(
    "body", [{"from": "yesterday"}, {"from": "2026-02-01", "to": "2026-01-01"}, {"x": 1}, [1]]
)
def test_bad_windows_are_422(cast, dashboard, body) -> None:
    response = dashboard("auditor").post("/v1/evidence/export", body, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_export_authorization(cast, dashboard, mirrored) -> None:
    assert APIClient().post("/v1/evidence/export").status_code == HTTPStatus.UNAUTHORIZED
    key = APIClient()
    key.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    assert key.post("/v1/evidence/export").status_code == HTTPStatus.UNAUTHORIZED
    assert dashboard("viewer").post("/v1/evidence/export").status_code == HTTPStatus.FORBIDDEN
    from apps.tenancy.models import Role
    from apps.tenancy.services import membership_add

    membership_add(org=cast.globex, username="globex-auditor", role=Role.AUDITOR)
    files = unpack(dashboard("auditor", org_slug="globex").post("/v1/evidence/export"))
    assert files["receipts.jsonl"] == b""


def test_the_command_writes_the_same_archive(cast, mirrored, tmp_path) -> None:
    target = tmp_path / "evidence.tar"
    call_command("export_evidence", "acme", "--output", str(target))
    files = unpack(target.read_bytes())
    assert json.loads(files["manifest.json"])["receipts"] == 4


def test_the_command_can_write_to_stdout(cast, mirrored, capfdbinary) -> None:
    call_command("export_evidence", "acme", "--output", "-")
    files = unpack(capfdbinary.readouterr().out)
    assert len(files["receipts.jsonl"].decode().splitlines()) == 4


def test_verify_receipts_checks_the_exported_jsonl(cast, mirrored, tmp_path) -> None:
    target = tmp_path / "evidence.tar"
    call_command("export_evidence", "acme", "--output", str(target))
    jsonl = tmp_path / "receipts.jsonl"
    jsonl.write_bytes(unpack(target.read_bytes())["receipts.jsonl"])
    done = subprocess.run(
        [sys.executable, "manage.py", "verify_receipts", str(jsonl)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings.test"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == 4
