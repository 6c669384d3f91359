"""Retention of receipt bodies: archive each closed month past an org's retention, verify
the archive, then retire the month's bodies from the mirror (docs/retention.md).

An org keeps receipt bodies in the mirror for ``Org.effective_receipt_retention_days``
(its override, or its plan's ``RECEIPT_RETENTION_DAYS``; 0: for ever). A month (UTC) is
due once its last day is that old. Each due month of an org, oldest first, becomes one
:class:`~apps.audit.models.ReceiptArchive`, moved forward by idempotent steps:

1. ``pending`` → ``written``: the evidence tar of the month's entries (the format of
   ``export_evidence``, with ``proofs.jsonl``: each receipt's transparency proof) is built
   on disk and saved once to ``STORAGES["archive"]`` (a directory, or an S3-compatible
   bucket through django-storages); its name, size and SHA-256 are recorded, with the act
   in the org's audit trail and a ``receipts.archived`` event.
2. ``written`` → ``verified``: the stored file is read back, whole, as a stream: its size
   and SHA-256; each member against the manifest (bytes, SHA-256, BLAKE3); each archived
   receipt against its entry (digest and action hash), the chain window recomputed from
   the archived receipts and linked to the entries around it; each proof verified offline
   against the log's origin. A file that does not verify is never relied on: the archive
   goes back to ``pending`` and the next run writes a new file.
3. ``verified`` → ``retired``: unless something blocks it (:func:`retention_blockers`),
   the month's bodies are emptied in batches (``mirror_bodies_retire``), then the record
   is marked, with the act in the audit trail and a ``receipts.retired`` event.

A crash anywhere leaves the record in the state of its last finished step, and the
mirror's bodies untouched until a verified archive exists: the next sweep resumes there.
What chain verification and the proofs need is never retired: seq, action hash, receipt
digest, chain hashes, trust level, supersede links, and the log's tree nodes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import PurePosixPath
from typing import IO, Any, NoReturn, cast

from blake3 import blake3
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage
from django.db import connection, transaction
from django.utils import timezone

from apps.audit.archive import STREAM_CHUNK
from apps.audit.evidence import evidence_export
from apps.audit.models import ArchiveState, ReceiptArchive
from apps.audit.retired import ArchiveUnreadable, archive_members
from apps.audit.selectors import legal_holds_blocking
from apps.audit.storage import (
    ArchiveMissing,
    ArchiveStorageError,
    archive_storage,
    archive_storage_blockers,
    hold_stored,
    lock_problem,
    lock_required,
    open_stored,
    stored_lock,
    stored_version,
)
from apps.audit.window import EvidenceWindow
from apps.common import outbound
from apps.common.timestamps import utc_text
from apps.receipts.mirror_chain import chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry
from apps.receipts.services import mirror_bodies_retire
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org
from apps.transparency.models import LogState
from apps.transparency.selectors import receipt_proofs_covered
from apps.transparency.tree.proof import verify_proof

logger = logging.getLogger(__name__)

ARCHIVE_FOLDER = "receipts"
# The retention worker, as the org's audit trail names it.
RETENTION_ACTOR = Actor(via="task", name="retention")
FILE_MODE = 0o600
FOLDER_MODE = 0o700
_ROWS = 2000  # entries per server-side cursor fetch while verifying


class ArchiveMismatch(Exception):
    """The archive read back is not what the mirror holds: it is not relied on."""


# --- Which months are due ----------------------------------------------------------------


def month_start(moment: datetime | date) -> date:
    return date(moment.year, moment.month, 1)


def next_month(first: date) -> date:
    return date(first.year + first.month // 12, first.month % 12 + 1, 1)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, UTC)


def retention_cutoff(org: Org, now: datetime) -> datetime | None:
    """Bodies received before this may be retired; None when the org keeps them for ever."""
    days = org.effective_receipt_retention_days
    return None if days <= 0 else now - timedelta(days=days)


@dataclass(frozen=True)
class DueMonth:
    month: date
    first_seq: int
    last_seq: int


def retention_next_month(*, org: Org, now: datetime) -> DueMonth | None:
    """The org's oldest month not archived yet, if it is closed and past retention: the
    entries from the one after the last archive's to the last one received in that month.

    An archive covers a range of seq (the entries of a month are contiguous in the chain,
    received in order under the org's append lock; at a month's boundary two web servers'
    clocks may disagree by a few milliseconds, and the entry then goes with its seq). Two
    indexed reads: the first unarchived entry by (org, seq), the month's last by (org,
    received_at)."""
    cutoff = retention_cutoff(org, now)
    if cutoff is None:
        return None
    last = ReceiptArchive.objects.filter(org=org).order_by("-last_seq").first()
    first_seq = last.last_seq + 1 if last is not None else 1
    first = MirrorEntry.objects.filter(org=org, seq=first_seq).values_list("received_at").first()
    if first is None:
        return None
    month = month_start(first[0].astimezone(UTC))
    end = _midnight(next_month(month))
    if end > cutoff:
        return None  # not closed yet, or inside retention
    last_seq = (
        MirrorEntry.objects.filter(org=org, received_at__lt=end)
        .order_by("-received_at", "-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return DueMonth(month=month, first_seq=first_seq, last_seq=max(first_seq, last_seq or 0))


def retention_blockers(*, org: Org, archive: ReceiptArchive) -> list[str]:
    """Why ``archive``'s month must not be archived or retired now, in words (none: go on).
    The one place a retirement asks whether it may happen; asked before the archive is
    written and again just before the bodies are retired.

    - The month's receipts must all be in a published checkpoint of the transparency log,
      so that the archive carries each one's proof.
    - Legal holds: an active hold covering any receipt of the org received within the
      month blocks it (:func:`apps.audit.selectors.legal_holds_blocking` answers; each
      hold is one reason here).
    - The archive storage must be able to keep it as configured: with
      ``object_lock=required``, a bucket whose new objects get a default object-lock
      retention (:func:`apps.audit.storage.archive_storage_blockers`).
    """
    reasons = [
        f"legal hold {hold.hold_id} ({hold.covers}) keeps the month: {hold.reason}"
        for hold in legal_holds_blocking(
            org.pk, start=_midnight(archive.month), end=_midnight(next_month(archive.month))
        )
    ]
    if not receipt_proofs_covered(org=org, last_seq=archive.last_seq):
        reasons.append(
            f"receipts up to #{archive.last_seq} are not in a published checkpoint yet "
            "(the archive carries each one's proof)"
        )
    return reasons + archive_storage_blockers(archive_storage())


# --- The sweep ----------------------------------------------------------------------------


@dataclass
class SweepResult:
    archived: int = 0
    retired: int = 0  # org-months retired
    blocked: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"archived": self.archived, "retired": self.retired, "blocked": self.blocked or []}


def retention_sweep(*, now: datetime | None = None, orgs: list[Org] | None = None) -> SweepResult:
    """Move every due org-month as far as it can go (see the module docstring): finish the
    archives an earlier run left unfinished, then archive and retire each newly due month,
    oldest first. An org another worker is sweeping is skipped."""
    now = now or timezone.now()
    result = SweepResult(blocked=[])
    for org in orgs if orgs is not None else Org.objects.order_by("pk"):
        with _org_lock(org) as mine:
            if not mine:
                continue
            try:
                retention_org_run(org=org, now=now, result=result)
            except ArchiveMismatch as error:  # logged; rewritten by the next sweep
                assert result.blocked is not None
                result.blocked.append(f"{org.slug}: {error}")
            except ArchiveStorageError as error:  # the storage's outage: the next sweep retries
                logger.error("retention of org %s: the archive storage failed: %s", org.slug, error)
                assert result.blocked is not None
                result.blocked.append(f"{org.slug}: the archive storage failed: {error}")
    return result


def retention_next_archive(*, org: Org, now: datetime) -> ReceiptArchive | None:
    """The month the sweep takes next for ``org``: an archive an earlier run left
    unfinished, else the oldest month now due (a record not saved yet); None when nothing
    is due, or retention was switched off since an unfinished archive was written (then
    everything is kept)."""
    archive = ReceiptArchive.objects.filter(org=org).exclude(state=ArchiveState.RETIRED).first()
    if archive is not None:
        return archive if retention_cutoff(org, now) is not None else None
    due = retention_next_month(org=org, now=now)
    if due is None:
        return None
    return ReceiptArchive(
        org=org, month=due.month, first_seq=due.first_seq, last_seq=due.last_seq,
        receipts=due.last_seq - due.first_seq + 1,
    )  # fmt: skip


def retention_org_run(*, org: Org, now: datetime, result: SweepResult | None = None) -> SweepResult:
    """Archive and retire ``org``'s due months, oldest first; stops at the first month
    that is blocked (a later month never goes before an earlier one)."""
    result = result or SweepResult(blocked=[])
    while True:
        archive = retention_next_archive(org=org, now=now)
        if archive is None:
            return result
        blockers = retention_blockers(org=org, archive=archive)
        if blockers:
            assert result.blocked is not None
            result.blocked += [f"{org.slug} {archive.month:%Y-%m}: {reason}" for reason in blockers]
            return result
        if archive.state == ArchiveState.PENDING:
            receipt_archive_write(archive=archive)
            result.archived += 1
        if archive.state == ArchiveState.WRITTEN:
            receipt_archive_verify(archive=archive)
        if archive.state == ArchiveState.VERIFIED:
            receipt_archive_retire(archive=archive)
            result.retired += 1


def retention_preview(*, org: Org, now: datetime) -> dict[str, Any]:
    """What the sweep would do next for ``org``, writing nothing: the month it would take
    (an archive an earlier run left unfinished, or the oldest month now due) and what
    would block it (:func:`retention_blockers`, the archive storage's included)."""
    days = org.effective_receipt_retention_days
    facts: dict[str, Any] = {"org": org.slug, "retention_days": days, "next": None}
    archive = retention_next_archive(org=org, now=now)
    if archive is None:
        return facts
    facts["next"] = {
        "month": f"{archive.month:%Y-%m}",
        "first_seq": archive.first_seq,
        "last_seq": archive.last_seq,
        "state": archive.state,
        "blocked_by": retention_blockers(org=org, archive=archive),
    }
    return facts


@contextmanager
def _org_lock(org: Org) -> Iterator[bool]:
    """One sweeper per org at a time (a session advisory lock on PostgreSQL): an archive
    takes minutes, and the next sweep may start before it ends."""
    if connection.vendor != "postgresql":
        yield True
        return
    key = ("receipt-retention", org.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtext(%s), %s)", list(key))
        mine = bool(cursor.fetchone()[0])
    try:
        yield mine
    finally:
        if mine:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(hashtext(%s), %s)", list(key))


# --- Step 1: write -----------------------------------------------------------------------


def archive_name(archive: ReceiptArchive) -> str:
    org = archive.org
    return f"{ARCHIVE_FOLDER}/{org.pk}-{org.slug}/{org.slug}-{archive.month:%Y-%m}.tar"


def archive_location(storage: Storage, name: str) -> str:
    """Where the file is, for a person: a path on disk, or the bucket's URL of the key."""
    if isinstance(storage, FileSystemStorage):
        return storage.path(name)
    bucket = getattr(storage, "bucket_name", None)
    if bucket:
        prefix = str(getattr(storage, "location", "") or "").strip("/")
        return f"s3://{bucket}/{prefix + '/' if prefix else ''}{name}"
    return name


def receipt_archive_write(*, archive: ReceiptArchive) -> ReceiptArchive:
    """Build the month's evidence tar and save it once to the archive storage; the record
    moves to ``written`` with the act audited and announced. A crash before the record is
    saved leaves at most an unreferenced file (never overwritten: the next attempt gets a
    new name)."""
    org = archive.org
    if archive._state.adding:  # a new month: recorded before anything is written
        archive.save()
    last_day = next_month(archive.month) - timedelta(days=1)
    window = EvidenceWindow(archive.month, last_day, seqs=(archive.first_seq, archive.last_seq))
    digest = hashlib.sha256()
    size = 0
    with (
        evidence_export(org=org, window=window, proofs=True, audited=False) as built,
        tempfile.TemporaryFile() as spool,
    ):
        for chunk in built:
            spool.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        spool.seek(0)
        storage = archive_storage()
        name = _store(storage, archive_name(archive), spool)
        version = stored_version(storage, name)
        hold_stored(storage, name, version, now=timezone.now())
    now = timezone.now()
    archive.storage_name, archive.location = name, archive_location(storage, name)
    archive.storage_version = version
    archive.size, archive.sha256 = size, digest.hexdigest()
    archive.state, archive.written_at = ArchiveState.WRITTEN, now
    facts = _facts(archive)
    with transaction.atomic():
        archive.save()
        org_audit_record(
            org=org, kind=AuditKind.RECEIPTS_ARCHIVED, actor=RETENTION_ACTOR, detail=facts,
            summary=f"Archived {archive.receipts} receipts of {archive.month:%Y-%m} "
            f"(#{archive.first_seq}-{archive.last_seq}) to {archive.location}",
        )  # fmt: skip
        outbound.emit(org_id=org.pk, event_type="receipts.archived", payload=facts.copy)
    return archive


def _store(storage: Storage, name: str, spool: IO[bytes]) -> str:
    """Save under ``name`` (or a free name beside it: an archive is never overwritten). On
    a local disk the folders are 0700 and the file 0600, by explicit modes."""
    if isinstance(storage, FileSystemStorage):
        folder = PurePosixPath(name).parent
        for depth in range(1, len(folder.parts) + 1):
            path = storage.path(str(PurePosixPath(*folder.parts[:depth])))
            os.makedirs(path, mode=FOLDER_MODE, exist_ok=True)
            os.chmod(path, FOLDER_MODE)
        stored = storage.save(name, File(spool))
        os.chmod(storage.path(stored), FILE_MODE)
        return stored
    return storage.save(name, File(spool))


def _facts(archive: ReceiptArchive) -> dict[str, Any]:
    """The archive as the audit trail and the events show it."""
    return {
        "month": f"{archive.month:%Y-%m}",
        "first_seq": archive.first_seq,
        "last_seq": archive.last_seq,
        "receipts": archive.receipts,
        "archive": archive.storage_name,
        "location": archive.location,
        "version": archive.storage_version,
        "bytes": archive.size,
        "sha256": archive.sha256,
        "written_at": utc_text(archive.written_at),
        "retired_at": utc_text(archive.retired_at),
        "object_lock": (
            {"mode": archive.lock_mode, "retain_until": utc_text(archive.locked_until)}
            if archive.lock_mode
            else None
        ),
    }


# --- Step 2: read back and verify ---------------------------------------------------------


def receipt_archive_verify(*, archive: ReceiptArchive) -> ReceiptArchive:
    """Read the stored archive back and check all of it (module docstring, step 2): the
    record moves to ``verified``, or, when anything differs, back to ``pending`` (a new
    file is written by the next run) and ArchiveMismatch is raised."""
    try:
        archive_check(archive=archive)
    except ArchiveStorageError as error:
        if not isinstance(error, ArchiveMissing):
            raise  # the storage did not answer: nothing is known of the file, try again later
        _unverified(archive, error)
    except (ArchiveMismatch, ArchiveUnreadable, OSError, ValueError, KeyError) as error:
        _unverified(archive, error)
    archive.state, archive.verified_at = ArchiveState.VERIFIED, timezone.now()
    archive.save(update_fields=["state", "verified_at", "lock_mode", "locked_until"])
    return archive


def _unverified(archive: ReceiptArchive, error: Exception) -> NoReturn:
    """The stored file is not the archive (changed, damaged or gone): never relied on, the
    record back to pending (the next run writes a new file)."""
    logger.error(
        "archive %s of org %s does not verify: %s", archive.storage_name, archive.org_id, error
    )
    ReceiptArchive.objects.filter(pk=archive.pk).update(state=ArchiveState.PENDING)
    archive.state = ArchiveState.PENDING
    raise ArchiveMismatch(f"{archive.storage_name}: {error}") from error


def archive_check(*, archive: ReceiptArchive) -> None:
    """Everything step 2 checks, raising ArchiveMismatch at the first difference; records
    the stored version's object lock on ``archive`` (not saved)."""
    storage = archive_storage()
    lock = stored_lock(storage, archive.storage_name, archive.storage_version)
    archive.lock_mode = lock.mode if lock else ""
    archive.locked_until = lock.retain_until if lock else None
    if lock_required(storage) and (problem := lock_problem(lock)):
        raise ArchiveMismatch(f"{problem}, and ARCHIVE_STORAGE_URL says object_lock=required")
    # One read of the stored file (a bucket's is a download): its bytes are hashed as the
    # members are checked. A file whose size or SHA-256 differs says so, whatever else
    # broke in it first.
    with open_stored(storage, archive.storage_name, archive.storage_version) as file:
        whole = _Hashed(file)
        try:
            _check_members(cast(IO[bytes], whole), archive)  # it reads like the file
        except Exception:
            whole.drain()
            _check_whole(whole, archive)
            raise
        whole.drain()
    _check_whole(whole, archive)


def _check_whole(whole: _Hashed, archive: ReceiptArchive) -> None:
    if (whole.size, whole.sha256) != (archive.size, archive.sha256):
        raise ArchiveMismatch("the stored file's size or SHA-256 differs from the record's")


def _check_members(file: IO[bytes], archive: ReceiptArchive) -> None:
    """Each member of the tar against the manifest, the receipts and the proofs."""
    manifest: dict[str, Any] | None = None
    checked: set[str] = set()
    for name, member in archive_members(file):
        if manifest is None:
            if name != "manifest.json":
                raise ArchiveMismatch("the first member is not manifest.json")
            manifest = json.loads(member.read())
            _check_manifest(manifest, archive)
            continue
        facts = manifest["files"].get(name)
        if facts is None:
            raise ArchiveMismatch(f"{name} is not in the manifest")
        hashed = _Hashed(member)
        if name == "receipts.jsonl":
            _check_receipts(hashed, archive)
        elif name == "proofs.jsonl":
            _check_proofs(hashed, archive)
        hashed.drain()
        if hashed.facts() != facts:
            raise ArchiveMismatch(f"{name} differs from its manifest line")
        checked.add(name)
    if manifest is None:
        raise ArchiveMismatch("the archive holds no member")
    missing = set(manifest["files"]) - checked
    if missing or not {"receipts.jsonl", "chain.json", "proofs.jsonl"} <= checked:
        raise ArchiveMismatch(f"members missing: {sorted(missing)[:5]}")


class _Hashed:
    """A file's or a member's bytes as they are read: counted and hashed (SHA-256, BLAKE3)."""

    def __init__(self, member: IO[bytes]) -> None:
        self._member = member
        self._sha256 = hashlib.sha256()
        self._blake3 = blake3()
        self.size = 0

    def _take(self, data: bytes) -> bytes:
        self._sha256.update(data)
        self._blake3.update(data)
        self.size += len(data)
        return data

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    def read(self, size: int = -1) -> bytes:
        return self._take(self._member.read(size))

    def lines(self) -> Iterator[bytes]:
        for line in self._member:
            yield self._take(line)

    def drain(self) -> None:
        while data := self._member.read(STREAM_CHUNK):
            self._take(data)

    def facts(self) -> dict[str, Any]:
        return {
            "bytes": self.size,
            "sha256": self.sha256,
            "blake3": self._blake3.hexdigest(),
        }


def _check_manifest(manifest: dict[str, Any], archive: ReceiptArchive) -> None:
    seen = (manifest.get("receipts"), manifest.get("first_seq"), manifest.get("last_seq"))
    if seen != (archive.receipts, archive.first_seq, archive.last_seq):
        raise ArchiveMismatch(f"the manifest covers {seen}, the archive record another range")


def _entries(archive: ReceiptArchive) -> Iterator[tuple[Any, ...]]:
    rows = MirrorEntry.objects.filter(
        org_id=archive.org_id, seq__gte=archive.first_seq, seq__lte=archive.last_seq
    ).order_by("seq")
    fields = ("seq", "action_hash", "receipt_digest", "supersedes_action_hash",
              "prev_chain_hash", "chain_hash")  # fmt: skip
    return rows.values_list(*fields).iterator(chunk_size=_ROWS)


def _check_receipts(member: _Hashed, archive: ReceiptArchive) -> None:
    """Each archived receipt is its entry's (digest), in seq order, and the chain window
    recomputes from the archived receipts: from the first entry's predecessor to the last
    entry's chain hash, which the entry after the window links to."""
    lines = member.lines()
    running: str | None = None
    count = 0
    for seq, action_hash, digest, supersedes, prev, stored_chain in _entries(archive):
        line = next(lines, None)
        if line is None:
            raise ArchiveMismatch(f"receipts.jsonl ends before #{seq}")
        text = line.decode().removesuffix("\n")
        if receipt_digest(text) != digest:
            raise ArchiveMismatch(f"the archived receipt of #{seq} differs from its digest")
        running = prev if running is None else running
        if prev != running:
            raise ArchiveMismatch(f"#{seq} does not link to its predecessor")
        running = chain_hash(
            prev_chain_hash=running, seq=seq, action_hash=action_hash,
            receipt_digest_hex=receipt_digest(text), supersedes_action_hash=supersedes,
        )  # fmt: skip
        if running != stored_chain:
            raise ArchiveMismatch(f"the chain hash of #{seq} does not recompute from the archive")
        count += 1
    if next(lines, None) is not None or count != archive.receipts:
        raise ArchiveMismatch("receipts.jsonl holds another number of receipts")
    following = (
        MirrorEntry.objects.filter(org_id=archive.org_id, seq=archive.last_seq + 1)
        .values_list("prev_chain_hash", flat=True)
        .first()
    )
    if following is not None and following != running:
        raise ArchiveMismatch("the entry after the window does not link to its last")


def _check_proofs(member: _Hashed, archive: ReceiptArchive) -> None:
    """Each receipt's proof verifies offline, against the log's own origin."""
    origin = LogState.objects.filter(pk=1).values_list("origin", flat=True).first() or ""
    lines = member.lines()
    for seq, action_hash, *_ in _entries(archive):
        line = next(lines, None)
        if line is None:
            raise ArchiveMismatch(f"proofs.jsonl ends before #{seq}")
        item = json.loads(line)
        if (item.get("seq"), item.get("action_hash")) != (seq, action_hash):
            raise ArchiveMismatch(f"the proof line of #{seq} names another receipt")
        verdict = verify_proof(
            action_hash=action_hash, proof=item.get("proof"), origin=origin,
            witness_keys=[], required_cosignatures=0,
        )  # fmt: skip
        if not verdict.valid:
            raise ArchiveMismatch(f"the proof of #{seq} does not verify: {verdict.reason}")
    if next(lines, None) is not None:
        raise ArchiveMismatch("proofs.jsonl holds more lines than receipts")


# --- Step 3: retire ------------------------------------------------------------------------


def receipt_archive_retire(*, archive: ReceiptArchive) -> ReceiptArchive:
    """Retire the month's bodies (only from a verified archive), then mark the archive
    retired, audited and announced. Idempotent: a crash mid-way leaves some bodies retired
    and the archive verified; the retry retires the rest (a retired body is served from
    the archive meanwhile)."""
    if archive.state != ArchiveState.VERIFIED:
        raise ArchiveMismatch(
            f"the archive of {archive} is {archive.state}: only a verified archive retires"
        )
    org = archive.org
    count = mirror_bodies_retire(org=org, first_seq=archive.first_seq, last_seq=archive.last_seq)
    archive.state, archive.retired_at = ArchiveState.RETIRED, timezone.now()
    facts = {**_facts(archive), "retired_now": count}
    with transaction.atomic():
        archive.save(update_fields=["state", "retired_at"])
        org_audit_record(
            org=org, kind=AuditKind.RECEIPTS_RETIRED, actor=RETENTION_ACTOR, detail=facts,
            summary=f"Retired the bodies of {archive.receipts} receipts of "
            f"{archive.month:%Y-%m} (#{archive.first_seq}-{archive.last_seq}); archived at "
            f"{archive.location}",
        )  # fmt: skip
        outbound.emit(org_id=org.pk, event_type="receipts.retired", payload=facts.copy)
    return archive
