"""The archive storage (``STORAGES["archive"]``): Django's storage API, plus what an
S3-compatible bucket adds to a write-once archive.

A directory (``FileSystemStorage``) needs nothing more. On a bucket (``ARCHIVE_STORAGE_URL=
s3://…``, :class:`ArchiveS3Storage`, django-storages' ``S3Storage``):

- **Versions.** In a versioned bucket (object lock needs one) anyone with ``PutObject`` on
  the prefix can upload a newer version under an archive's key. The version written is
  recorded (``ReceiptArchive.storage_version``) and every read takes that version, so a
  later upload never stands in for the file that was verified.
- **Object lock.** ``?object_lock=required`` in the URL makes the lock a condition of
  retirement: the bucket must have object lock with a default retention (else the month is
  blocked before anything is written, :func:`archive_storage_blockers`), and the stored
  version must be held by a lock that outlives now (else it does not verify). The lock's
  mode and date are recorded on the archive.
- **Reads stream.** An archive is read as the HTTP body, never copied whole into memory
  (django-storages' ``S3File`` would download the object into a spooled file first).

The bucket's side lives in :mod:`apps.audit.s3` (imported only when the URL names a
bucket: boto3 costs every process that imports it); this module asks for it by duck
typing, so a directory needs none of it.

Errors of the storage service (unreachable, refused, missing) are raised as
:class:`ArchiveStorageError`, one line each, so the sweep can say so and go on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO

from django.core.files.storage import Storage, storages
from django.utils import timezone

ARCHIVE_STORAGE = "archive"
OBJECT_LOCK_REQUIRED = "required"


class ArchiveStorageError(OSError):
    """The archive storage could not do what was asked (unreachable, refused, missing): an
    input/output error, as a directory's would be."""


class ArchiveMissing(ArchiveStorageError):
    """The storage answered, and the file (or the version asked for) is not there."""


@dataclass(frozen=True)
class ObjectLock:
    """The retention that holds one stored version: until then nobody, the bucket's owner
    included (``COMPLIANCE``), or nobody without a special permission (``GOVERNANCE``),
    can delete it or shorten the date."""

    mode: str
    retain_until: datetime


@dataclass(frozen=True)
class Retention:
    """A bucket's default object-lock retention: a mode for a number of days or years."""

    mode: str
    days: int = 0
    years: int = 0

    def until(self, start: datetime) -> datetime:
        if self.days:
            return start + timedelta(days=self.days)
        try:
            return start.replace(year=start.year + self.years)
        except ValueError:  # 29 February, into a year without one
            return start.replace(year=start.year + self.years, day=28)

    def __str__(self) -> str:
        span = f"{self.days} days" if self.days else f"{self.years} years"
        return f"{self.mode}, {span}"


def archive_storage() -> Storage:
    return storages[ARCHIVE_STORAGE]


def lock_required(storage: Storage) -> bool:
    return getattr(storage, "object_lock", "") == OBJECT_LOCK_REQUIRED


def stored_version(storage: Storage, name: str) -> str:
    """The version just written under ``name``, "" where the storage has no versions."""
    reader = getattr(storage, "stored_version", None)
    return reader(name) if reader is not None else ""


@contextmanager
def open_stored(storage: Storage, name: str, version: str = "") -> Iterator[IO[bytes]]:
    """Read the archive ``name`` (at ``version`` where the storage has versions) as a
    stream of bytes."""
    opener = getattr(storage, "open_version", None)
    try:
        file = opener(name, version) if opener is not None else storage.open(name, "rb")
    except FileNotFoundError:
        raise ArchiveMissing(f"{name} is not in the archive storage") from None
    try:
        yield file
    finally:
        file.close()


def stored_lock(storage: Storage, name: str, version: str = "") -> ObjectLock | None:
    """The object lock holding the stored version (None: no lock, or no such storage)."""
    reader = getattr(storage, "version_lock", None)
    return reader(name, version) if reader is not None else None


def hold_stored(storage: Storage, name: str, version: str, *, now: datetime) -> None:
    """With ``object_lock=required``, make sure the bucket's default retention holds the
    version just written (:meth:`apps.audit.s3.ArchiveS3Storage.hold_version`)."""
    if lock_required(storage):
        storage.hold_version(name, version, now=now)  # type: ignore[attr-defined]


def archive_storage_blockers(storage: Storage) -> list[str]:
    """What keeps the storage from taking an archive now, in words (none: go on): a bucket
    must answer, and with ``object_lock=required`` hold new objects under a default
    retention. Asked before a month's tar is built, so an outage costs no work."""
    try:
        probe = getattr(storage, "probe", None)
        if probe is not None:
            probe()
        if not lock_required(storage):
            return []
        retention = storage.default_retention()  # type: ignore[attr-defined]
    except ArchiveStorageError as error:
        return [str(error)]
    if retention is None:
        return [
            f"the archive bucket {getattr(storage, 'bucket_name', '?')!r} has no default "
            "object-lock retention, and ARCHIVE_STORAGE_URL says object_lock=required"
        ]
    return []


def lock_problem(lock: ObjectLock | None) -> str | None:
    """Why a stored version's lock does not make it write-once now (None: it does)."""
    if lock is None:
        return "the stored version is under no object lock"
    if lock.retain_until <= timezone.now():
        return f"the stored version's object lock ended on {lock.retain_until.isoformat()}"
    return None
