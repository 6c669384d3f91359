"""Arming the failed-authentication limits in a test: small limits, a clean cache and
django-ratelimit's clock under the test's hand."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import cache


class FakeTime:
    """django-ratelimit's clock (its module's ``time``), moved by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now


def arm_failure_limits(
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    *,
    per_address: int,
    per_username: int,
    window: int,
) -> FakeTime:
    settings.AUTH_FAILURE_LIMITS_ENABLED = True
    settings.AUTH_FAILURES_PER_ADDRESS = per_address
    settings.LOGIN_FAILURES_PER_USERNAME = per_username
    settings.AUTH_FAILURE_WINDOW_SECONDS = window
    cache.clear()
    monkeypatch.setattr("apps.tenancy.credential_limits._vouched_until", {})
    clock = FakeTime()
    monkeypatch.setattr("django_ratelimit.core.time", SimpleNamespace(time=clock.time))
    return clock
