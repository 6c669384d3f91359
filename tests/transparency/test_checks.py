"""The log's deployment checks (mirror.E201, mirror.E202)."""

from __future__ import annotations

import pytest

from apps.transparency.checks import check_stored_origin, origin_problems
from apps.transparency.services import transparency_publish_epoch
from tests.transparency.factories import mirror


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_production_needs_a_valid_origin() -> None:
    assert ids(origin_problems(origin="", required=True)) == ["mirror.E201"]
    assert ids(origin_problems(origin="", required=False)) == []
    for bad in ("has space", "a+b", "x" * 256, "tab\there"):
        assert ids(origin_problems(origin=bad, required=True)) == ["mirror.E201"], bad
    assert ids(origin_problems(origin="mirror.example.com/v1/log", required=True)) == []


@pytest.mark.django_db
def test_the_origin_of_epoch_one_is_kept(cast, settings) -> None:
    assert check_stored_origin(databases=["default"]) == []
    mirror(cast.acme, ["ab" * 32])
    transparency_publish_epoch()
    assert check_stored_origin(databases=["default"]) == []
    settings.TRANSPARENCY_ORIGIN = "other.example/v1/log"
    assert ids(check_stored_origin(databases=["default"])) == ["mirror.E202"]
    assert check_stored_origin(databases=None) == []
