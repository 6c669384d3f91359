"""The public log routes share one rate per client address; cosignatures have their own."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.api.transparency_base import CosignRateThrottle, PublicLogThrottle

pytestmark = pytest.mark.django_db


class FrozenClock:
    def __call__(self) -> float:
        return 2_000_000.0


@pytest.fixture(autouse=True)
def limits_on(settings, monkeypatch) -> None:
    settings.RATE_LIMITS_ENABLED = True
    settings.TRANSPARENCY_PUBLIC_RATE_PER_MINUTE = 2
    settings.TRANSPARENCY_COSIGN_RATE_PER_MINUTE = 1
    cache.clear()
    for throttle in (PublicLogThrottle, CosignRateThrottle):
        monkeypatch.setattr(throttle, "clock", staticmethod(FrozenClock()))


def test_public_routes_share_one_rate_per_address() -> None:
    client = APIClient()
    assert client.get("/v1/log/witnesses").status_code == HTTPStatus.OK
    assert client.get("/v1/log/checkpoint").status_code == HTTPStatus.NOT_FOUND
    limited = client.get("/v1/log/witnesses")
    assert limited.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert int(limited["Retry-After"]) >= 1
    other = APIClient(REMOTE_ADDR="10.0.0.9")
    assert other.get("/v1/log/witnesses").status_code == HTTPStatus.OK


def test_cosignature_submissions_have_their_own_rate() -> None:
    client = APIClient()
    body = {"checkpoint_size": 1, "cosignature": "x"}
    assert client.post("/v1/log/cosignatures", body, format="json").status_code == 422
    limited = client.post("/v1/log/cosignatures", body, format="json")
    assert limited.status_code == HTTPStatus.TOO_MANY_REQUESTS
