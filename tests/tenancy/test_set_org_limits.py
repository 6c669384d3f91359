"""manage.py set_org_limits: the monthly cap and the SDK-plane rate, each apart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.tenancy.models import Org


def run(capsys: Any, *args: str) -> dict[str, Any]:
    call_command("set_org_limits", "acme", *args)
    return dict(json.loads(capsys.readouterr().out))


def test_the_monthly_cap_is_set_and_reset_without_touching_the_rate(cast, capsys) -> None:
    call_command("set_org_limits", "acme", "--burst", "7")
    capsys.readouterr()
    out = run(capsys, "--monthly-cap", "500")
    assert (out["monthly_receipt_cap"], out["overridden"]) == (500, True)
    assert (out["rate_per_minute"], out["burst"], out["rate_overridden"]) == (1200, 7, True)
    out = run(capsys, "--monthly-cap", "plan")
    assert out["overridden"] is False
    acme = Org.objects.get(pk=cast.acme.pk)
    assert (acme.monthly_receipt_cap, acme.rate_per_minute, acme.rate_burst) == (None, None, 7)


def test_the_rate_alone_leaves_the_cap(cast, capsys) -> None:
    run(capsys, "--monthly-cap", "9")
    out = run(capsys, "--rate-per-minute", "30")
    assert (out["monthly_receipt_cap"], out["rate_per_minute"], out["burst"]) == (9, 30, 200)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "nothing to set"),
        (("--rate-per-minute", "fast"), "not an integer"),
        (("--rate-per-minute", "0"), "at least 1"),
        (("--monthly-cap", "-1"), "cannot be negative"),
    ],
)
def test_it_refuses_what_is_not_a_limit(cast, args, message) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("set_org_limits", "acme", *args)
    acme = Org.objects.get(pk=cast.acme.pk)
    assert (acme.monthly_receipt_cap, acme.rate_per_minute, acme.rate_burst) == (None, None, None)


def test_an_unknown_org_is_refused(cast) -> None:
    with pytest.raises(CommandError):
        call_command("set_org_limits", "nope", "--burst", "3")


def test_the_retention_is_set_and_reset_and_never_below_the_floor(cast, capsys, settings) -> None:
    settings.RETENTION_FLOOR_DAYS = 30
    out = run(capsys, "--retention-days", "400")
    assert (out["retention_days"], out["retention_overridden"]) == (400, True)
    assert run(capsys, "--retention-days", "0")["retention_days"] == 0  # kept for ever
    with pytest.raises(CommandError, match="below the floor of 30 days"):
        run(capsys, "--retention-days", "29")
    out = run(capsys, "--retention-days", "plan")
    assert (out["retention_days"], out["retention_overridden"]) == (365, False)  # pro's
