"""The retention tests' org and dates: acme's receipts of January, February and May 2026,
seen from mid-June (tests/audit/conftest.py pushes them), and what the tests read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO
from typing import Any

from django.core.management import call_command

from apps.audit.models import ReceiptArchive
from apps.audit.retention import retention_next_archive
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import Org

NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)
JANUARY = datetime(2026, 1, 10, 9, tzinfo=UTC)
FEBRUARY = datetime(2026, 2, 10, 9, tzinfo=UTC)
MAY = datetime(2026, 5, 20, 9, tzinfo=UTC)


def entries(org) -> list[MirrorEntry]:
    return list(MirrorEntry.objects.filter(org=org).order_by("seq"))


def run(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, stdout=out)
    answer: dict[str, Any] = json.loads(out.getvalue().splitlines()[-1])
    return answer


def first_due(org: Org) -> ReceiptArchive:
    """The record of ``org``'s first month due at NOW, not written yet."""
    archive = retention_next_archive(org=org, now=NOW)
    assert archive is not None
    return archive
