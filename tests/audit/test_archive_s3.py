"""Retention with the archive in an S3-compatible bucket (django-storages, boto3) served by
a real HTTP server the tests start (tests/s3_server.py): each month is written to the
bucket, read back from it and verified, and only then retired; the version written is the
one every later read takes; with ``object_lock=required`` nothing is retired unless the
bucket's object lock holds it."""

from __future__ import annotations

import io
import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.utils import timezone

from apps.audit.models import ArchiveState, ReceiptArchive
from apps.audit.retention import retention_sweep
from apps.audit.storage import (
    ArchiveStorageError,
    ObjectLock,
    Retention,
    archive_storage,
    hold_stored,
    lock_problem,
    open_stored,
    stored_version,
)
from apps.common.timestamps import utc_text
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import AuditKind, OrgAuditEvent
from config.env import parse_archive_storage_url
from tests.audit.retention_data import NOW, entries, first_due, run
from tests.audit.test_evidence_export import unpack
from tests.s3_server import CREDENTIALS, S3Server

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

COMPLIANCE_A_DAY = {"Mode": "COMPLIANCE", "Days": 1}


@pytest.fixture(autouse=True)
def credentials(monkeypatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # an unreachable bucket fails at once


def use_bucket(settings, server: S3Server, bucket: str, *, query: str = "") -> None:
    url = f"s3://{bucket}/mirror?endpoint_url={server.endpoint}&region_name=us-east-1{query}"
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": parse_archive_storage_url(url, default_root=Path("/nonexistent")),
    }


@pytest.fixture
def locked_bucket(settings, s3_server) -> str:
    """The archive: a bucket with object lock (COMPLIANCE, a day), ``object_lock=required``."""
    bucket = s3_server.bucket(lock=COMPLIANCE_A_DAY)
    use_bucket(settings, s3_server, bucket, query="&object_lock=required")
    return bucket


def keys(server: S3Server, bucket: str) -> list[str]:
    listing = server.client().list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def test_months_go_to_a_locked_bucket_are_read_back_from_it_and_only_then_retired(
    cast, months, dashboard, locked_bucket, s3_server
):
    bucket = locked_bucket
    client = dashboard("auditor")
    window = {"from": "2026-01-01", "to": "2026-02-28"}
    before = unpack(client.post("/v1/evidence/export", window, format="json"))

    result = retention_sweep(now=NOW)

    assert result.as_dict() == {"archived": 2, "retired": 2, "blocked": []}
    january, february = ReceiptArchive.objects.filter(org=cast.acme).order_by("month")
    assert keys(s3_server, bucket) == sorted(
        f"mirror/{archive.storage_name}" for archive in (january, february)
    )
    head = s3_server.client().head_object(Bucket=bucket, Key=f"mirror/{january.storage_name}")
    assert january.storage_version == head["VersionId"] != ""
    assert january.location == f"s3://{bucket}/mirror/{january.storage_name}"
    assert january.lock_mode == "COMPLIANCE"
    assert january.locked_until == head["ObjectLockRetainUntilDate"]
    assert january.locked_until > timezone.now()
    assert [entry.seq for entry in entries(cast.acme) if not entry.receipt] == [1, 2, 3, 4, 5]
    # What retirement promises holds with the bodies in the bucket.
    assert run("verify_chain", "acme", "--against-archive")["checked_against_archive"] == 5
    after = unpack(client.post("/v1/evidence/export", window, format="json"))
    for name in ("receipts.jsonl", "chain.json", "sessions.json", "approvals.json"):
        assert after[name] == before[name], name
    chain = client.get("/v1/audit/chain?limit=10").json()
    archive_view = {entry["seq"]: entry for entry in chain["entries"]}[2]["archive"]
    assert (archive_view["version"], archive_view["location"]) == (
        january.storage_version,
        january.location,
    )
    assert archive_view["locked_until"] == utc_text(january.locked_until)
    retired = OrgAuditEvent.objects.filter(org=cast.acme, kind=AuditKind.RECEIPTS_RETIRED)
    assert {event.detail["object_lock"]["mode"] for event in retired} == {"COMPLIANCE"}


def test_a_locked_archive_cannot_be_deleted_and_a_later_upload_never_stands_in_for_it(
    cast, months, dashboard, locked_bucket, s3_server
):
    bucket = locked_bucket
    retention_sweep(now=NOW)
    january = ReceiptArchive.objects.get(org=cast.acme, month__month=1)
    key = f"mirror/{january.storage_name}"
    s3 = s3_server.client()

    with pytest.raises(ClientError) as refused:
        s3.delete_object(Bucket=bucket, Key=key, VersionId=january.storage_version)
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    # Someone with PutObject uploads another file under the archive's key: a new version.
    forged = s3.put_object(Bucket=bucket, Key=key, Body=b"not the archive")
    assert forged["VersionId"] != january.storage_version

    # Every read still takes the version that was verified.
    assert stored_version(archive_storage(), january.storage_name) == forged["VersionId"]
    with open_stored(archive_storage(), january.storage_name, january.storage_version) as file:
        assert unpack(file.read())["receipts.jsonl"].count(b"\n") == 3
    assert run("verify_chain", "acme", "--against-archive")["checked_against_archive"] == 5
    export = dashboard("auditor").post(
        "/v1/evidence/export", {"from": "2026-01-01", "to": "2026-01-31"}, format="json"
    )
    assert unpack(export)["receipts.jsonl"].count(b"\n") == 3


def test_object_lock_required_with_a_bucket_that_has_none_writes_and_retires_nothing(
    cast, months, settings, s3_server
):
    bucket = s3_server.bucket(versioned=True)
    use_bucket(settings, s3_server, bucket, query="&object_lock=required")

    result = retention_sweep(now=NOW)

    assert (result.archived, result.retired) == (0, 0)
    assert result.as_dict()["blocked"] == [
        f"acme 2026-01: the archive bucket {bucket!r} has no default object-lock retention, "
        "and ARCHIVE_STORAGE_URL says object_lock=required"
    ]
    assert keys(s3_server, bucket) == []
    assert all(entry.receipt for entry in entries(cast.acme))


def test_a_plain_bucket_serves_as_the_archive_when_no_lock_is_required(
    cast, months, settings, s3_server
):
    bucket = s3_server.bucket()  # no versions, no lock
    use_bucket(settings, s3_server, bucket)

    assert retention_sweep(now=NOW).retired == 2

    january = ReceiptArchive.objects.get(org=cast.acme, month__month=1)
    assert (january.storage_version, january.lock_mode, january.locked_until) == ("", "", None)
    assert run("verify_chain", "acme", "--against-archive")["checked_against_archive"] == 5


def test_an_unreachable_bucket_blocks_the_month_before_any_work_and_the_next_sweep_finishes(
    cast, months, settings, s3_server, caplog
):
    bucket = s3_server.bucket(lock=COMPLIANCE_A_DAY)
    closed = S3Server(endpoint="http://127.0.0.1:9", process=s3_server.process)
    use_bucket(settings, closed, bucket)

    with caplog.at_level(logging.INFO):
        result = retention_sweep(now=NOW)

    assert (result.archived, result.retired) == (0, 0)
    (blocked,) = result.as_dict()["blocked"]
    assert blocked.startswith("acme 2026-01: reaching the archive bucket: Could not connect")
    assert [record for record in caplog.records if record.exc_info] == []
    assert not ReceiptArchive.objects.exists()  # the tar was never built
    assert all(entry.receipt for entry in entries(cast.acme))

    use_bucket(settings, s3_server, bucket)
    assert retention_sweep(now=NOW).retired == 2


def test_a_bucket_lost_while_writing_is_one_line_and_the_month_stays_pending(
    cast, months, settings, s3_server, caplog
):
    from apps.audit.retention import receipt_archive_write

    use_bucket(settings, S3Server(endpoint="http://127.0.0.1:9", process=s3_server.process),
               s3_server.bucket())  # fmt: skip
    archive = first_due(cast.acme)

    with pytest.raises(ArchiveStorageError, match=r"writing receipts/.*Could not connect") as lost:
        receipt_archive_write(archive=archive)

    assert lost.value.__cause__ is None  # one line, no chained botocore traceback
    assert lost.value.__suppress_context__
    assert ReceiptArchive.objects.get().state == ArchiveState.PENDING
    assert all(entry.receipt for entry in entries(cast.acme))


def test_a_large_archive_goes_up_in_parts_under_the_lock_and_reads_back_as_a_stream(
    settings, s3_server
):
    from boto3.s3.transfer import TransferConfig

    bucket = s3_server.bucket(lock=COMPLIANCE_A_DAY)
    use_bucket(settings, s3_server, bucket, query="&object_lock=required")
    storage: Any = archive_storage()
    storage.transfer_config = TransferConfig(multipart_threshold=5 << 20,
                                             multipart_chunksize=5 << 20)  # fmt: skip
    data = uuid.uuid4().bytes * (12 << 16)  # 12 MiB: three parts

    name = storage.save("receipts/big.tar", ContentFile(data))

    version = stored_version(storage, name)
    hold_stored(storage, name, version, now=timezone.now())  # as the archive's write does
    head = s3_server.client().head_object(Bucket=bucket, Key=f"mirror/{name}", VersionId=version)
    assert head["ETag"].strip('"').endswith("-3")  # a multipart upload of three parts
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert head["ObjectLockRetainUntilDate"] > timezone.now() + timedelta(hours=23)
    with open_stored(storage, name, version) as stream:
        assert not hasattr(stream, "_file")  # the HTTP body itself, not a spooled copy
        read = io.BytesIO()
        while chunk := stream.read(1 << 20):
            read.write(chunk)
    assert read.getvalue() == data
    # An archive is never overwritten: the same name again is saved beside it.
    assert storage.save("receipts/big.tar", ContentFile(b"x")) != name


def test_a_missing_archive_is_a_storage_error_not_a_crash(settings, s3_server):
    use_bucket(settings, s3_server, s3_server.bucket())

    with pytest.raises(ArchiveStorageError, match="answered NoSuchKey"):
        open_stored(archive_storage(), "receipts/none.tar").__enter__()


def test_a_default_retention_runs_from_the_moment_it_is_applied() -> None:
    start = datetime(2028, 2, 29, 12, tzinfo=UTC)
    assert Retention(mode="COMPLIANCE", days=30).until(start) == start + timedelta(days=30)
    leap_day_in_seven_years = datetime(2035, 2, 28, 12, tzinfo=UTC)
    assert Retention(mode="GOVERNANCE", years=7).until(start) == leap_day_in_seven_years
    assert str(Retention(mode="COMPLIANCE", years=7)) == "COMPLIANCE, 7 years"


def test_a_lock_counts_only_while_it_lasts() -> None:
    now = timezone.now()
    assert lock_problem(None) == "the stored version is under no object lock"
    assert lock_problem(ObjectLock(mode="GOVERNANCE", retain_until=now + timedelta(days=1))) is None
    ended = lock_problem(ObjectLock(mode="COMPLIANCE", retain_until=now - timedelta(seconds=1)))
    assert ended is not None
    assert ended.startswith("the stored version's object lock ended on ")


def test_the_archive_record_is_in_the_audit_trail_with_its_version(cast, months, locked_bucket):
    retention_sweep(now=NOW)

    archived = OrgAuditEvent.objects.filter(org=cast.acme, kind=AuditKind.RECEIPTS_ARCHIVED)
    versions = {event.detail["version"] for event in archived}
    assert versions == set(
        ReceiptArchive.objects.filter(org=cast.acme).values_list("storage_version", flat=True)
    )
    assert "" not in versions
    assert MirrorEntry.objects.filter(org=cast.acme, receipt="").count() == 5
    assert json.dumps([event.detail for event in archived])  # plain JSON, as the events carry


def test_the_console_shows_an_archive_with_its_version_and_lock(
    cast, months, locked_bucket, s3_server, client
):
    from django.contrib.auth import get_user_model

    retention_sweep(now=NOW)
    january = ReceiptArchive.objects.get(org=cast.acme, month__month=1)
    client.force_login(get_user_model().objects.get(username="acme-auditor"))

    listing = client.get("/admin/audit/receiptarchive/")
    page = client.get(f"/admin/audit/receiptarchive/{january.pk}/change/")

    assert listing.status_code == page.status_code == 200
    assert f"s3://{locked_bucket}/mirror/{january.storage_name}" in listing.content.decode()
    assert "Locked until" in listing.content.decode()
    text = page.content.decode()
    assert "2026-01, receipts #1-3" in text
    assert january.storage_version in text
    assert "COMPLIANCE" in text


def test_the_dry_run_names_a_bucket_that_cannot_keep_the_promise(cast, months, settings, s3_server):
    bucket = s3_server.bucket(versioned=True)
    use_bucket(settings, s3_server, bucket, query="&object_lock=required")
    out = StringIO()

    call_command("retention_sweep", "acme", "--dry-run", stdout=out)

    assert json.loads(out.getvalue())["next"]["blocked_by"] == [
        f"the archive bucket {bucket!r} has no default object-lock retention, "
        "and ARCHIVE_STORAGE_URL says object_lock=required"
    ]
    assert keys(s3_server, bucket) == []


def test_an_archive_gone_before_it_was_verified_is_written_again(cast, months, settings, s3_server):
    from apps.audit.retention import receipt_archive_write

    bucket = s3_server.bucket()  # no lock: an object can be deleted
    use_bucket(settings, s3_server, bucket)
    written = receipt_archive_write(archive=first_due(cast.acme))
    s3_server.client().delete_object(Bucket=bucket, Key=f"mirror/{written.storage_name}")

    first = retention_sweep(now=NOW)

    assert (first.archived, first.retired) == (0, 0)
    (blocked,) = first.as_dict()["blocked"]
    assert blocked.endswith("answered 404")
    assert ReceiptArchive.objects.get().state == ArchiveState.PENDING
    assert all(entry.receipt for entry in entries(cast.acme))
    assert retention_sweep(now=NOW).retired == 2
    assert keys(s3_server, bucket) != []
