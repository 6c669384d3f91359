"""Deployment invariants of the audit app (ids ``mirror.E4xx``).

- ``mirror.E401``: the archive storage (``STORAGES["archive"]``, from
  ``ARCHIVE_STORAGE_URL``) cannot be built: its backend does not import (an ``s3://`` URL
  on an install without boto3) or refuses its options. Retention would
  otherwise fail only at its first sweep, hours after the deploy.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags
from django.core.checks import register as register_check
from django.core.files.storage import storages


def archive_storage_problems() -> list[CheckMessage]:
    try:
        storages.create_storage(settings.STORAGES["archive"])
    except Exception as error:  # any failure to build it is the deployment's to fix
        return [
            Error(
                f"the archive storage cannot be built: {type(error).__name__}: {error}",
                hint="Check ARCHIVE_STORAGE_URL (docs/retention.md); an s3:// URL needs "
                "boto3 (requirements/base.txt).",
                id="mirror.E401",
            )
        ]
    return []


@register_check(Tags.compatibility)
def archive_storage_check(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    return archive_storage_problems()
