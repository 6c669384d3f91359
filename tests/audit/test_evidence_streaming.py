"""Evidence export in constant memory: built on disk, streamed by the API and the
console alike, every streamed byte hashed by the manifest; a window whose end no date can
hold is refused in the profile's error body, never a 500."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from http import HTTPStatus
from typing import Any

import pytest
from blake3 import blake3
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.approvals.services import approval_open, approver_key_register
from apps.audit import archive as archive_writer
from apps.audit import evidence
from apps.audit.evidence import evidence_export, parse_window
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import verify_chain
from apps.receipts.verifier.chain import link_hash
from apps.tenancy.org_context import activate_orgs
from tests.approvals.conftest import Approver
from tests.audit.test_evidence_export import streamed, unpack
from tests.audit.test_evidence_sessions import REVIEW
from tests.receipts.factories import Agent

JSON_MEMBERS = ("manifest.json", "chain.json", "approvals.json", "approver_keys.json",
                "policy_approvals.json", "sessions.json")  # fmt: skip
# Code point order (Python's), not a locale's: "B" < "a-2" < "a1" < "b" < "é".
SESSION_IDS = ("b", "é", "a1", "B", "a-2")


def console(role: str) -> Client:
    client = Client()
    assert client.login(username=f"acme-{role}", password=f"pw-{role}")
    return client


def mirrored(cast) -> int:
    return MirrorEntry.objects.filter(org=cast.acme).count()


def exported(cast) -> dict[str, bytes]:
    with evidence_export(org=cast.acme, window=parse_window(None, None)) as archive:
        return unpack(b"".join(archive))


def evidence_url(org_id: int) -> str:
    return f"/admin/tenancy/org/{org_id}/evidence/"


@pytest.fixture
def sessions(cast, push) -> dict[str, list[dict[str, Any]]]:
    """Five complete sessions, one with a gap, one starting at seq 1, and one whose last
    position was suspended and then approved (two forms, no successor to choose)."""
    agent = Agent()
    chains = {session_id: agent.session(session_id, 3) for session_id in SESSION_IDS}
    gap = agent.session("gap", 3)
    chains["gap"] = [gap[0], gap[2]]
    chains["late"] = agent.session("late", 3)[1:]
    for chain in chains.values():
        for receipt in chain:
            assert push(receipt).status_code == HTTPStatus.CREATED
    alice = Approver("alice")
    approver_key_register(org=cast.acme, public_key=alice.public, key_id="alice")
    first = agent.receipt(session_id="tail", seq=0)
    suspended = agent.receipt(
        session_id="tail", seq=1, prev_receipt_hash=link_hash(first["content"]), policy=REVIEW
    )
    for receipt in (first, suspended):
        assert push(receipt).status_code == HTTPStatus.CREATED
    content = suspended["content"]
    approval_open(org=cast.acme, action_hash=content["action_hash"], rule_id="payments.review")
    approved = agent.approve_l1(suspended, alice.key)
    assert push(approved, supersedes=content["action_hash"]).status_code == HTTPStatus.CREATED
    chains["tail"] = [first, approved]
    return chains


def test_the_api_streams_the_export_with_its_length(cast, dashboard, sessions) -> None:
    response = dashboard("auditor").post("/v1/evidence/export", {}, format="json")
    assert response.status_code == HTTPStatus.OK
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "application/x-tar"
    body = streamed(response)
    assert int(response["Content-Length"]) == len(body)
    assert len(body) % tarfile.RECORDSIZE == 0


def test_the_console_download_is_streamed_by_the_same_service(cast, sessions) -> None:
    response = console("auditor").post(evidence_url(cast.acme.pk), {"from": "", "to": ""})
    assert response.status_code == HTTPStatus.OK
    assert StreamingHttpResponse in type(response).__mro__
    assert "evidence-acme.tar" in response["Content-Disposition"]
    body = streamed(response)
    assert int(response["Content-Length"]) == len(body)
    assert json.loads(unpack(body)["manifest.json"])["receipts"] == mirrored(cast)


def test_every_streamed_byte_is_hashed_by_the_manifest(cast, sessions, monkeypatch) -> None:
    monkeypatch.setattr(archive_writer, "STREAM_CHUNK", 700)  # many chunks, across member bounds
    with evidence_export(org=cast.acme, window=parse_window(None, None)) as archive:
        chunks = list(archive)
    assert len(chunks) > 10
    assert {len(chunk) for chunk in chunks[:-1]} == {700}
    files = unpack(b"".join(chunks))
    manifest = json.loads(files["manifest.json"])
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    for name, data in files.items():
        if name == "manifest.json":
            continue
        assert manifest["files"][name] == {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "blake3": blake3(data).hexdigest(),
        }


def test_the_tar_is_byte_for_byte_what_tarfile_writes(cast, sessions) -> None:
    with evidence_export(org=cast.acme, window=parse_window(None, None)) as archive:
        body = b"".join(archive)
        assert archive.size == len(body)
    rebuilt = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(body)) as source,
        tarfile.open(fileobj=rebuilt, mode="w", format=tarfile.PAX_FORMAT) as target,
    ):
        for member in source.getmembers():
            info = tarfile.TarInfo(member.name)
            info.size, info.mtime, info.mode = member.size, member.mtime, 0o644
            target.addfile(info, source.extractfile(member))
    assert rebuilt.getvalue() == body


def test_json_members_are_exactly_what_json_dumps_writes(cast, sessions) -> None:
    """Written one item at a time, they are the bytes the whole value would give."""
    files = exported(cast)
    for name in JSON_MEMBERS:
        value = json.loads(files[name])
        assert files[name] == archive_writer.json_text(value).encode(), name


@pytest.mark.parametrize(
    "items",
    [[], [1], [{"a": [1, {"b": []}], "c": {}}, "x\ny", None], [{"deep": [[{"e": "é"}]]}] * 3],
)
def test_streamed_json_matches_json_dumps_for_any_items(items, tmp_path) -> None:
    def shape(collection):
        return {"head": "h", "entries": collection, "next": None}

    for as_object in (False, True):
        pairs = [(f"k{index}", item) for index, item in enumerate(items)]
        with (tmp_path / f"{as_object}.json").open("w+b") as file:
            spool = archive_writer.Spool(file)
            collection = pairs if as_object else items
            archive_writer.write_json(spool, shape, collection, as_object=as_object)
            file.seek(0)
            written = file.read()
        expected = shape(dict(pairs) if as_object else items)
        assert written == archive_writer.json_text(expected).encode()
        assert spool.facts()["sha256"] == hashlib.sha256(written).hexdigest()


def test_sessions_come_in_code_point_order_and_each_complete_one_verifies(cast, sessions):
    files = exported(cast)
    listed = json.loads(files["sessions.json"])
    assert [entry["session_id"] for entry in listed] == sorted(sessions)
    for number, entry in enumerate(listed, start=1):
        if entry["session_id"] in ("gap", "late"):
            assert entry["file"] is None
            continue
        assert entry["file"] == f"sessions/{number:04d}.jsonl"
        lines = files[entry["file"]].decode().splitlines()
        assert [json.loads(line)["content"]["action_hash"] for line in lines] == [
            receipt["content"]["action_hash"] for receipt in sessions[entry["session_id"]]
        ]
        assert verify_chain(lines)["kind"] == "Valid"
    gap = next(entry for entry in listed if entry["session_id"] == "gap")
    assert (gap["receipts"], gap["first_seq"], gap["last_seq"]) == (2, 0, 2)


def test_the_stream_reads_nothing_from_the_database_after_the_view(cast, dashboard, sessions):
    """Every read is done inside the view, under its org context: once it has returned,
    the body comes from disk, whatever the connection's context has become."""
    response = dashboard("auditor").post("/v1/evidence/export", {}, format="json")
    activate_orgs([])  # as if the request's context had ended: no org's rows
    with CaptureQueriesContext(connection) as queries:
        files = unpack(streamed(response))
    assert len(queries) == 0
    assert json.loads(files["manifest.json"])["receipts"] == mirrored(cast)
    assert len(files["receipts.jsonl"].decode().splitlines()) == mirrored(cast)


def test_the_temporary_files_are_closed_with_the_response(
    cast, dashboard, sessions, monkeypatch
) -> None:
    closed: list[evidence.EvidenceArchive] = []
    close = evidence.EvidenceArchive.close

    def spy(archive: evidence.EvidenceArchive) -> None:
        closed.append(archive)
        close(archive)

    monkeypatch.setattr(evidence.EvidenceArchive, "close", spy)
    response = dashboard("auditor").post("/v1/evidence/export", {}, format="json")
    next(iter(response.streaming_content))  # a client that goes away after one chunk
    response.close()  # what the WSGI server does then
    (archive,) = set(closed)
    files = [member.file for member in archive._members if member.file is not None]
    assert files
    assert all(file.closed for file in [*files, archive._session_data])


@pytest.mark.parametrize(
    "body",
    [{"to": "9999-12-31"}, {"from": "9999-12-31"}, {"from": "2026-01-01", "to": "9999-12-31"}],
)
def test_a_window_past_the_last_day_is_422_in_the_error_body(cast, dashboard, body) -> None:
    response = dashboard("auditor").post("/v1/evidence/export", body, format="json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert set(response.json()) == {"detail"}
    assert "no later than 9999-12-30" in response.json()["detail"]


def test_the_last_day_itself_is_a_valid_end(cast, dashboard, mirrored_one) -> None:
    response = dashboard("auditor").post("/v1/evidence/export", {"to": "9999-12-30"}, format="json")
    assert response.status_code == HTTPStatus.OK
    assert json.loads(unpack(response)["manifest.json"])["receipts"] == 1


def test_the_console_refuses_a_window_past_the_last_day_with_a_message(cast) -> None:
    answer = console("auditor").post(
        evidence_url(cast.acme.pk), {"from": "", "to": "9999-12-31"}, follow=True
    )
    assert answer.status_code == HTTPStatus.OK
    assert "Refused: to: a date no later than 9999-12-30" in answer.content.decode()


def test_the_command_refuses_a_window_past_the_last_day(cast, tmp_path) -> None:
    with pytest.raises(CommandError, match="no later than 9999-12-30"):
        call_command("export_evidence", "acme", "--output", str(tmp_path / "e.tar"),
                     "--to", "9999-12-31")  # fmt: skip


@pytest.fixture
def mirrored_one(push) -> None:
    assert push(Agent().receipt()).status_code == HTTPStatus.CREATED


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_export_reads_one_read_only_snapshot(cast, push, monkeypatch) -> None:
    """Several passes over the window, one snapshot: the members agree with each other."""
    seen: list[tuple[str, str]] = []
    write_receipts = evidence.write_receipts

    def spy(spool, rows, body):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('transaction_isolation'), "
                "current_setting('transaction_read_only')"
            )
            seen.append(cursor.fetchone())
        return write_receipts(spool, rows, body)

    monkeypatch.setattr(evidence, "write_receipts", spy)
    assert push(Agent().receipt()).status_code == HTTPStatus.CREATED
    assert not connection.in_atomic_block
    files = exported(cast)
    assert seen == [("repeatable read", "on")]
    assert json.loads(files["manifest.json"])["receipts"] == 1
    assert not connection.in_atomic_block
