"""The archive on an S3-compatible bucket: django-storages' ``S3Storage`` with what a
write-once archive needs (:mod:`apps.audit.storage` says what and why). Named by
``STORAGES["archive"]["BACKEND"]`` when ``ARCHIVE_STORAGE_URL`` is an ``s3://`` URL
(``config.env.parse_archive_storage_url``), and imported only then."""

from __future__ import annotations

from datetime import datetime
from typing import IO, Any

from botocore.exceptions import BotoCoreError, ClientError
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from apps.audit.storage import ArchiveMissing, ArchiveStorageError, ObjectLock, Retention

# What S3-compatible services answer for an object or a version that is not there (HEAD
# has no body: its code is the status).
_MISSING = ("NoSuchKey", "NoSuchVersion", "404")
# What S3-compatible services answer for a bucket without an object-lock configuration.
_NO_LOCK_CONFIGURATION = ("ObjectLockConfigurationNotFoundError", "ObjectLockConfigurationNotFound")


class ArchiveS3Storage(S3Storage):
    """django-storages' S3 backend with the archive's own option ``object_lock`` (``""`` or
    ``"required"``), the version of each write, and version-pinned, streamed reads."""

    def get_default_settings(self) -> dict[str, Any]:
        return {**super().get_default_settings(), "object_lock": ""}

    def save(self, name: str | None, content: Any, max_length: int | None = None) -> str:
        try:
            return str(super().save(name, content, max_length))
        except (BotoCoreError, ClientError) as error:
            raise self._failure(f"writing {name}", error) from None

    def probe(self) -> None:
        """Raise ArchiveStorageError unless the bucket answers (``HeadBucket``)."""
        try:
            self.connection.meta.client.head_bucket(Bucket=self.bucket_name)
        except (BotoCoreError, ClientError) as error:
            raise self._failure("reaching the archive bucket", error) from None

    def stored_version(self, name: str) -> str:
        """The version id of the object now under ``name`` ("" in an unversioned bucket)."""
        return str(self._head(name, "").get("VersionId") or "")

    def open_version(self, name: str, version: str) -> IO[bytes]:
        """The bytes of one stored version, as the response's stream."""
        try:
            response = self.connection.meta.client.get_object(
                Bucket=self.bucket_name, Key=self._key(name), **_version(version)
            )
        except (BotoCoreError, ClientError) as error:
            raise self._failure(f"reading {name}", error) from None
        return response["Body"]

    def version_lock(self, name: str, version: str) -> ObjectLock | None:
        """The object lock that holds the stored version, None when none does."""
        head = self._head(name, version)
        mode, until = head.get("ObjectLockMode"), head.get("ObjectLockRetainUntilDate")
        if not mode or until is None:
            return None
        return ObjectLock(mode=str(mode), retain_until=until)

    def hold_version(self, name: str, version: str, *, now: datetime) -> ObjectLock | None:
        """Make sure the bucket's default retention holds the stored version: the bucket
        applies it to each new object, but some S3-compatible servers skip it for an object
        uploaded in parts; then it is set on the version here (``PutObjectRetention``).
        Returns the lock that holds the version (None: the bucket has no default)."""
        lock = self.version_lock(name, version)
        if lock is not None:
            return lock
        retention = self.default_retention()
        if retention is None:
            return None
        lock = ObjectLock(mode=retention.mode, retain_until=retention.until(now))
        try:
            self.connection.meta.client.put_object_retention(
                Bucket=self.bucket_name, Key=self._key(name), **_version(version),
                Retention={"Mode": lock.mode, "RetainUntilDate": lock.retain_until},
            )  # fmt: skip
        except (BotoCoreError, ClientError) as error:
            raise self._failure(f"setting the retention of {name}", error) from None
        return self.version_lock(name, version)

    def default_retention(self) -> Retention | None:
        """The bucket's default object-lock retention, None when the bucket has no object
        lock or no default retention."""
        try:
            answer = self.connection.meta.client.get_object_lock_configuration(
                Bucket=self.bucket_name
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in _NO_LOCK_CONFIGURATION:
                return None
            raise self._failure("reading the bucket's object lock", error) from None
        except BotoCoreError as error:
            raise self._failure("reading the bucket's object lock", error) from None
        configuration = answer.get("ObjectLockConfiguration", {})
        default = configuration.get("Rule", {}).get("DefaultRetention", {})
        if configuration.get("ObjectLockEnabled") != "Enabled" or not default.get("Mode"):
            return None
        if not (default.get("Days") or default.get("Years")):
            return None
        return Retention(
            mode=str(default["Mode"]), days=int(default.get("Days") or 0),
            years=int(default.get("Years") or 0),
        )  # fmt: skip

    def _key(self, name: str) -> str:
        return str(self._normalize_name(clean_name(name)))

    def _head(self, name: str, version: str) -> dict[str, Any]:
        try:
            return self.connection.meta.client.head_object(
                Bucket=self.bucket_name, Key=self._key(name), **_version(version)
            )
        except (BotoCoreError, ClientError) as error:
            raise self._failure(f"reading {name}", error) from None

    def _failure(self, what: str, error: Exception) -> ArchiveStorageError:
        if isinstance(error, ClientError):
            code = error.response.get("Error", {}).get("Code", "?")
            kind = ArchiveMissing if code in _MISSING else ArchiveStorageError
            return kind(f"{what}: the bucket {self.bucket_name!r} answered {code}")
        return ArchiveStorageError(f"{what}: {error}")


def _version(version: str) -> dict[str, str]:
    return {"VersionId": version} if version else {}
