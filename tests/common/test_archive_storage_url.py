"""ARCHIVE_STORAGE_URL becomes STORAGES["archive"]: a directory, or an S3-compatible bucket
through django-storages; anything else stops the process at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import parse_archive_storage_url

ROOT = Path("/srv/mirror/archive-default")


def test_empty_is_the_archive_root_directory() -> None:
    assert parse_archive_storage_url("", default_root=ROOT) == {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(ROOT)},
    }


def test_a_file_url_names_another_directory() -> None:
    entry = parse_archive_storage_url("file:///data/archive", default_root=ROOT)
    assert entry["OPTIONS"] == {"location": "/data/archive"}


def test_an_s3_url_is_django_storages_s3_backend_that_never_overwrites() -> None:
    entry = parse_archive_storage_url(
        "s3://mirror-archive/receipts/eu?endpoint_url=https://s3.example.net&region_name=eu-1",
        default_root=ROOT,
    )
    assert entry == {
        "BACKEND": "apps.audit.s3.ArchiveS3Storage",
        "OPTIONS": {
            "bucket_name": "mirror-archive", "location": "receipts/eu", "file_overwrite": False,
            "default_acl": None, "querystring_auth": True,
            "endpoint_url": "https://s3.example.net", "region_name": "eu-1",
        },
    }  # fmt: skip


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://key:secret@bucket/x", "carries credentials"),
        ("s3:///prefix", "names no bucket"),
        ("s3://bucket?acl=public-read", "unknown option"),
        ("s3://bucket?object_lock=preferred", "object_lock is 'required' or absent"),
        ("file://host/relative", "file:///absolute/path"),
        ("ftp://archive.example/x", "use file:///absolute/path or s3://"),
    ],
)
def test_a_url_it_cannot_use_is_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        parse_archive_storage_url(url, default_root=ROOT)
    if "secret" in url:
        with pytest.raises(ImproperlyConfigured) as refused:
            parse_archive_storage_url(url, default_root=ROOT)
        assert "secret" not in str(refused.value)


def test_object_lock_required_is_an_option_of_the_archive_backend() -> None:
    from django.core.files.storage import storages

    from apps.audit.storage import lock_required

    entry = parse_archive_storage_url("s3://b/p?object_lock=required", default_root=ROOT)
    assert entry["OPTIONS"]["object_lock"] == "required"
    assert lock_required(storages.create_storage(entry))
    plain = parse_archive_storage_url("s3://b/p", default_root=ROOT)
    assert not lock_required(storages.create_storage(plain))


def test_an_archive_storage_that_cannot_be_built_is_a_system_check_error(settings) -> None:
    from apps.audit.checks import archive_storage_problems

    assert archive_storage_problems() == []
    settings.STORAGES = {
        **settings.STORAGES,
        "archive": {"BACKEND": "storages.backends.no_such_backend.Storage"},
    }
    (problem,) = archive_storage_problems()
    assert problem.id == "mirror.E401"
    assert "archive storage cannot be built" in problem.msg
