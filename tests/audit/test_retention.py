"""Retention: each closed month past an org's retention is archived (an evidence tar in the
archive storage), read back and verified, and only then are its bodies retired from the
mirror; the chain, the proofs, duplicates, the chain API and the evidence export still
hold across a retired range."""

from __future__ import annotations

import io
import json
import tarfile
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from nacl.signing import SigningKey

from apps.audit import retention
from apps.audit.models import ArchiveState, ReceiptArchive
from apps.audit.retention import (
    ArchiveMismatch,
    receipt_archive_verify,
    receipt_archive_write,
    retention_next_month,
    retention_sweep,
)
from apps.audit.selectors import audit_chain_verify
from apps.audit.storage import archive_storage
from apps.events.models import Event as EventRow
from apps.events.services import webhook_endpoint_create
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import AuditKind, OrgAuditEvent
from apps.tenancy.services import org_set_limits
from apps.transparency.models import LogState
from apps.transparency.selectors import receipt_proof
from apps.transparency.services import transparency_publish_epoch
from apps.transparency.tree.proof import verify_proof
from tests.audit.retention_data import JANUARY, NOW, entries, first_due, run
from tests.audit.test_evidence_export import unpack
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path: Path) -> Path:
    folder = tmp_path / "archive"
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder)},
        },
    }
    return folder


def test_months_past_retention_are_archived_verified_and_retired_and_the_rest_untouched(
    cast, months
):
    before = {entry.seq: entry.receipt for entry in entries(cast.acme)}

    result = retention_sweep(now=NOW)

    assert (result.archived, result.retired) == (2, 2)  # January and February; May is inside
    archives = list(ReceiptArchive.objects.filter(org=cast.acme).order_by("month"))
    assert [(a.month.month, a.first_seq, a.last_seq, a.receipts, a.state) for a in archives] == [
        (1, 1, 3, 3, ArchiveState.RETIRED),
        (2, 4, 5, 2, ArchiveState.RETIRED),
    ]
    after = {entry.seq: entry.receipt for entry in entries(cast.acme)}
    assert [seq for seq, text in after.items() if text == ""] == [1, 2, 3, 4, 5]
    assert (after[6], after[7]) == (before[6], before[7])  # May: inside retention
    # The archive is the month's evidence tar, its receipts byte for byte the mirror's.
    with archive_storage().open(archives[0].storage_name, "rb") as file:
        files = unpack(file.read())
    assert files["receipts.jsonl"].decode().splitlines() == [before[1], before[2], before[3]]
    assert {"manifest.json", "VERIFY.md", "chain.json", "proofs.jsonl"} <= set(files)
    assert json.loads(files["manifest.json"])["first_seq"] == 1
    assert archives[0].location.endswith(archives[0].storage_name)
    # Nothing further is due: a second sweep changes nothing.
    assert retention_sweep(now=NOW).as_dict() == {"archived": 0, "retired": 0, "blocked": []}


def test_retention_zero_never_archives_or_retires(cast, months):
    org_set_limits(org=cast.acme, receipt_retention_days=0)

    assert retention_sweep(now=NOW + timedelta(days=3650)).archived == 0

    assert not ReceiptArchive.objects.exists()
    assert all(entry.receipt for entry in entries(cast.acme))


def test_a_month_inside_retention_is_never_touched(cast, months):
    # On 2026-04-15 with 90 days, January (ended 2026-02-01, 73 days ago) is not due yet.
    assert retention_next_month(org=cast.acme, now=datetime(2026, 4, 15, tzinfo=UTC)) is None
    assert retention_sweep(now=datetime(2026, 4, 15, tzinfo=UTC)).archived == 0
    # Ten days later January is due, February is not.
    retention_sweep(now=datetime(2026, 5, 2, tzinfo=UTC))
    assert [a.month.month for a in ReceiptArchive.objects.all()] == [1]
    assert [entry.seq for entry in entries(cast.acme) if not entry.receipt] == [1, 2, 3]


def test_the_retention_cannot_be_set_below_the_floor(cast, settings):
    from apps.common.errors import InvalidInput

    settings.RETENTION_FLOOR_DAYS = 30
    with pytest.raises(InvalidInput, match="below the floor of 30 days"):
        org_set_limits(org=cast.acme, receipt_retention_days=7)
    assert org_set_limits(org=cast.acme, receipt_retention_days=0).receipt_retention_days == 0
    cast.globex.refresh_from_db()
    assert cast.globex.effective_receipt_retention_days == settings.RECEIPT_RETENTION_DAYS["free"]


def test_a_month_not_in_a_published_checkpoint_waits(cast, push):
    org_set_limits(org=cast.acme, receipt_retention_days=90)
    receipt = Agent().receipt()
    push(receipt)
    MirrorEntry.objects.update(received_at=JANUARY)

    result = retention_sweep(now=NOW)

    assert result.archived == 0
    assert "not in a published checkpoint" in result.as_dict()["blocked"][0]
    assert MirrorEntry.objects.get().receipt


def test_a_crash_after_the_archive_is_written_loses_nothing_and_the_retry_finishes(
    cast, months, monkeypatch
):
    archive = first_due(cast.acme)
    receipt_archive_write(archive=archive)  # ... and the worker dies here
    assert ReceiptArchive.objects.get().state == ArchiveState.WRITTEN
    assert all(entry.receipt for entry in entries(cast.acme))

    # The retry dies again half-way through retiring (after the first batch).
    real = retention.mirror_bodies_retire

    def crash_after_one_batch(**kwargs):
        real(**{**kwargs, "last_seq": kwargs["first_seq"]})
        raise RuntimeError("worker killed")

    monkeypatch.setattr(retention, "mirror_bodies_retire", crash_after_one_batch)
    with pytest.raises(RuntimeError):
        retention_sweep(now=NOW)
    assert ReceiptArchive.objects.get(month=archive.month).state == ArchiveState.VERIFIED
    assert [entry.seq for entry in entries(cast.acme) if not entry.receipt] == [1]
    assert audit_chain_verify(org=cast.acme, against_archive=True).ok

    monkeypatch.setattr(retention, "mirror_bodies_retire", real)
    result = retention_sweep(now=NOW)

    assert result.retired == 2
    assert [entry.seq for entry in entries(cast.acme) if not entry.receipt] == [1, 2, 3, 4, 5]
    assert ReceiptArchive.objects.filter(state=ArchiveState.RETIRED).count() == 2
    assert audit_chain_verify(org=cast.acme, against_archive=True).ok


def test_an_archive_that_does_not_read_back_is_never_relied_on(cast, months, archive_dir):
    new = first_due(cast.acme)
    archive = receipt_archive_write(archive=new)
    path = Path(archive_storage().path(archive.storage_name))
    damaged = bytearray(path.read_bytes())
    damaged[2000] ^= 1
    path.chmod(0o600)
    path.write_bytes(bytes(damaged))

    with pytest.raises(ArchiveMismatch):
        receipt_archive_verify(archive=archive)

    assert ReceiptArchive.objects.get().state == ArchiveState.PENDING
    assert all(entry.receipt for entry in entries(cast.acme))
    # The next sweep writes a new file (the damaged one is never overwritten) and goes on.
    assert retention_sweep(now=NOW).retired == 2
    assert ReceiptArchive.objects.get(month=archive.month).storage_name != archive.storage_name


def test_a_re_push_of_a_retired_receipt_answers_duplicate_with_its_original_seq(cast, months, push):
    retention_sweep(now=NOW)
    receipt = months["jan"][1]

    response = push(receipt)

    assert response.status_code == HTTPStatus.OK
    assert (response.json()["status"], response.json()["seq"]) == ("duplicate", 2)
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 7


def test_proofs_and_verify_chain_hold_across_a_retired_range(cast, months):
    retention_sweep(now=NOW)
    origin = LogState.objects.get().origin

    for receipt in months["jan"] + months["may"]:
        action_hash = receipt["content"]["action_hash"]
        proof = receipt_proof(org=cast.acme, action_hash=action_hash)
        verdict = verify_proof(action_hash=action_hash, proof=proof, origin=origin,
                               witness_keys=[], required_cosignatures=0)  # fmt: skip
        assert verdict.valid, verdict
    assert run("verify_chain", "acme") == {
        "org": "acme", "size": 7, "head": entries(cast.acme)[-1].chain_hash, "ok": True,
        "retired": 5, "checked_against_archive": 0,
    }  # fmt: skip
    assert run("verify_chain", "acme", "--against-archive")["checked_against_archive"] == 5


def test_verify_chain_refuses_a_body_emptied_outside_an_archive(cast, months):
    retention_sweep(now=NOW)
    MirrorEntry.objects.filter(org=cast.acme, seq=6).update(receipt="")

    with pytest.raises(CommandError, match="seq 6: its body is gone"):
        run("verify_chain", "acme")


def test_verify_chain_against_the_archive_refuses_an_archive_changed_since(cast, months):
    retention_sweep(now=NOW)
    archive = ReceiptArchive.objects.get(month__month=1)
    path = Path(archive_storage().path(archive.storage_name))
    with tarfile.open(path) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    name = next(n for n in members if n.endswith("receipts.jsonl"))
    lines = members[name].decode().splitlines()
    lines[1] = lines[1].replace('"L0"', '"L1"')
    members[name] = ("\n".join(lines) + "\n").encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member_name, data in members.items():
            info = tarfile.TarInfo(member_name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())

    with pytest.raises(CommandError, match="seq 2: archived receipt does not match"):
        run("verify_chain", "acme", "--against-archive")


def test_the_audit_chain_api_marks_retired_entries_and_says_where_they_are(cast, months, dashboard):
    retention_sweep(now=NOW)
    january = ReceiptArchive.objects.get(month__month=1)

    body = dashboard("auditor").get("/v1/audit/chain?limit=10").json()

    by_seq = {entry["seq"]: entry for entry in body["entries"]}
    assert (by_seq[7]["retired"], by_seq[7]["archive"]) == (False, None)
    assert by_seq[7]["receipt"]
    assert by_seq[2]["retired"] is True
    assert by_seq[2]["receipt"] == ""
    assert by_seq[2]["archive"] == {
        "month": "2026-01", "name": january.storage_name, "location": january.location,
        "version": "", "sha256": january.sha256, "first_seq": 1, "last_seq": 3,
        "locked_until": None,
    }  # fmt: skip


def test_the_evidence_export_of_a_retired_range_is_served_from_the_archive(cast, months, dashboard):
    client = dashboard("auditor")
    window = {"from": "2026-01-01", "to": "2026-02-28"}
    before = unpack(client.post("/v1/evidence/export", window, format="json"))

    retention_sweep(now=NOW)
    after = unpack(client.post("/v1/evidence/export", window, format="json"))

    for name in ("receipts.jsonl", "chain.json", "sessions.json", "approvals.json"):
        assert after[name] == before[name], name
    assert len(after["receipts.jsonl"].decode().splitlines()) == 5
    sessions = {name: data for name, data in after.items() if name.startswith("sessions/")}
    assert sessions == {name: data for name, data in before.items() if name.startswith("sessions/")}


def test_the_receipt_page_says_the_body_is_archived_and_where(cast, months, client):
    from django.contrib.auth import get_user_model

    retention_sweep(now=NOW)
    client.force_login(get_user_model().objects.get(username="acme-auditor"))
    entry = MirrorEntry.objects.get(org=cast.acme, seq=2)
    archive = ReceiptArchive.objects.get(month__month=1)

    page = client.get(f"/admin/receipts/mirrorentry/{entry.pk}/change/")

    assert page.status_code == HTTPStatus.OK
    text = page.content.decode()
    assert "The body of this receipt is archived" in text
    assert archive.location in text


def test_archive_and_retirement_are_in_the_org_audit_log_and_emit_events(cast, months):
    webhook_endpoint_create(
        org=cast.acme, url="http://127.0.0.1:9/hooks",
        event_types=["receipts.archived", "receipts.retired"],
    )  # fmt: skip

    retention_sweep(now=NOW)

    audited = OrgAuditEvent.objects.filter(org=cast.acme, kind__startswith="receipts.")
    kinds = list(audited.order_by("id").values_list("kind", flat=True))
    assert kinds == [AuditKind.RECEIPTS_ARCHIVED, AuditKind.RECEIPTS_RETIRED] * 2
    first = audited.order_by("id").first()
    assert first is not None
    assert (first.via, first.actor, first.detail["month"]) == ("task", "retention", "2026-01")
    events = EventRow.objects.filter(org=cast.acme, type__startswith="receipts.").order_by("id")
    assert [event.type for event in events] == ["receipts.archived", "receipts.retired"] * 2
    retired = events[1].payload
    january = ReceiptArchive.objects.get(month__month=1)
    assert (retired["first_seq"], retired["last_seq"], retired["location"]) == (
        1, 3, january.location,
    )  # fmt: skip
    assert retired["retired_now"] == 3


def test_a_supersede_of_a_retired_receipt_is_refused_clearly(cast, months, push, agent):
    approver_key = SigningKey.generate()
    retention_sweep(now=NOW)
    suspended = months["jan"][0]

    response = push(
        agent.approve_l1(suspended, approver_key), supersedes=suspended["content"]["action_hash"]
    )

    assert response.status_code in (HTTPStatus.CONFLICT, HTTPStatus.UNPROCESSABLE_ENTITY)
    assert "retention" in json.dumps(response.json())


def test_a_legal_hold_keeps_the_months_it_covers_until_it_is_released(cast, months):
    from datetime import date

    from apps.audit.holds import legal_hold_release, legal_hold_set

    hold = legal_hold_set(
        org=cast.acme, scope="range", reason="litigation 42",
        range_start=date(2026, 2, 1), range_end=date(2026, 2, 28),
    )  # fmt: skip

    result = retention_sweep(now=NOW)

    # January goes; February, which the hold covers, stays whole and unarchived.
    assert (result.archived, result.retired) == (1, 1)
    assert any(hold.hold_id in reason and "litigation 42" in reason for reason in result.blocked)
    assert [e.seq for e in entries(cast.acme) if e.receipt == ""] == [1, 2, 3]

    legal_hold_release(hold=hold, reason="case closed")
    assert retention_sweep(now=NOW).retired == 1
    assert [e.seq for e in entries(cast.acme) if e.receipt == ""] == [1, 2, 3, 4, 5]


def test_a_hold_on_a_session_keeps_the_month_its_receipts_were_received_in(cast, push, agent):
    from apps.audit.holds import legal_hold_set

    org_set_limits(org=cast.acme, receipt_retention_days=90)
    (receipt,) = agent.session("sess-held", 1)
    assert push(receipt).status_code == HTTPStatus.CREATED
    entry = MirrorEntry.objects.get(action_hash=receipt["content"]["action_hash"])
    MirrorEntry.objects.filter(pk=entry.pk).update(received_at=JANUARY)
    transparency_publish_epoch()
    legal_hold_set(org=cast.acme, scope="session", reason="incident", session_id="sess-held")

    result = retention_sweep(now=NOW)

    assert result.retired == 0
    assert MirrorEntry.objects.get(pk=entry.pk).receipt != ""


def test_the_command_says_what_the_sweep_would_do_and_writes_nothing(cast, months):
    out = StringIO()
    call_command("retention_sweep", "acme", "--dry-run", stdout=out)

    assert json.loads(out.getvalue()) == {
        "org": "acme", "retention_days": 90,
        "next": {"month": "2026-01", "first_seq": 1, "last_seq": 3, "state": "pending",
                 "blocked_by": []},
    }  # fmt: skip
    assert not ReceiptArchive.objects.exists()
    assert all(entry.receipt for entry in entries(cast.acme))


def test_the_command_runs_the_sweep_now(cast, months):
    # Today every month of the fixture (the last is May 2026) is past acme's 90 days.
    assert run("retention_sweep", "acme") == {"archived": 3, "retired": 3, "blocked": []}

    assert [entry.seq for entry in entries(cast.acme) if entry.receipt] == []
    out = StringIO()
    call_command("retention_sweep", "--dry-run", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {line["org"]: line["next"] for line in lines}["acme"] is None


def test_an_archive_file_gone_before_it_was_verified_is_written_again(cast, months):
    written = receipt_archive_write(archive=first_due(cast.acme))
    Path(archive_storage().path(written.storage_name)).unlink()

    assert "is not in the archive storage" in retention_sweep(now=NOW).as_dict()["blocked"][0]
    assert ReceiptArchive.objects.get().state == ArchiveState.PENDING
    assert retention_sweep(now=NOW).retired == 2
