"""Fixtures of the retention tests (on a directory, tests/audit/test_retention.py, and on a
bucket, tests/audit/test_archive_s3.py)."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import pytest

from apps.receipts.models import MirrorEntry
from apps.tenancy.services import org_set_limits
from apps.transparency.services import transparency_publish_epoch
from tests.audit.retention_data import FEBRUARY, JANUARY, MAY
from tests.receipts.factories import Agent


@pytest.fixture
def agent() -> Agent:
    return Agent()


@pytest.fixture
def months(cast, push, agent) -> dict[str, list[dict]]:
    """acme (90 days' retention): 3 receipts in January, 2 in February, 2 in May, all
    in a published checkpoint."""
    org_set_limits(org=cast.acme, receipt_retention_days=90)
    pushed: dict[str, list[dict]] = {}
    for name, when, count in (("jan", JANUARY, 3), ("feb", FEBRUARY, 2), ("may", MAY, 2)):
        receipts = [agent.receipt() for _ in range(count)]
        for index, receipt in enumerate(receipts):
            assert push(receipt).status_code == HTTPStatus.CREATED
            MirrorEntry.objects.filter(action_hash=receipt["content"]["action_hash"]).update(
                received_at=when + timedelta(minutes=index)
            )
        pushed[name] = receipts
    transparency_publish_epoch()
    return pushed
