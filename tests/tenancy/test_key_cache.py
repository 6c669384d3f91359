"""A worker remembers the API keys it authenticated for ``API_KEY_CACHE_SECONDS``: a busy
key skips its lookup; a change made in this worker takes effect at once, one made
elsewhere within the bound; nothing but an authenticated key is remembered."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.receipts.models import MirrorEntry
from apps.tenancy import key_cache
from apps.tenancy.models import ApiKey
from apps.tenancy.org_context import activate_all_orgs
from apps.tenancy.services import api_key_auth, api_key_issue, api_key_revoke, org_set_limits

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.tenancy.urls")]


class Clock:
    """The cache's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(key_cache, "time", fake)
    return fake


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prefixes looked up in the database."""
    seen: list[str] = []
    real = api_key_auth._api_key_by_prefix

    def counted(prefix: str, digest: str) -> ApiKey | None:
        seen.append(prefix)
        return real(prefix, digest)

    monkeypatch.setattr(api_key_auth, "_api_key_by_prefix", counted)
    return seen


def caller(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=secret)
    return client


def whoami(secret: str) -> Any:
    return caller(secret).get("/v1/whoami")


def test_a_key_is_looked_up_once_within_the_bound(cast, clock, lookups, settings):
    settings.API_KEY_CACHE_SECONDS = 5
    for _ in range(3):
        answer = whoami(cast.acme_key.secret)
        assert answer.status_code == HTTPStatus.OK
        assert answer.json()["org"] == "acme"
    assert len(lookups) == 1
    clock.now += 5
    assert whoami(cast.acme_key.secret).status_code == HTTPStatus.OK
    assert len(lookups) == 2


def test_two_orgs_keys_stay_apart(cast, clock, lookups):
    assert whoami(cast.acme_key.secret).json()["org"] == "acme"
    assert whoami(cast.globex_key.secret).json()["org"] == "globex"
    assert whoami(cast.acme_key.secret).json()["org"] == "acme"
    assert whoami(cast.globex_key.secret).json()["org"] == "globex"
    assert len(lookups) == 2


def test_a_key_revoked_in_this_worker_is_refused_at_once(cast, clock):
    assert whoami(cast.acme_key.secret).status_code == HTTPStatus.OK
    api_key_revoke(prefix=cast.acme_key.api_key.prefix)
    assert whoami(cast.acme_key.secret).status_code == HTTPStatus.UNAUTHORIZED


def test_a_key_revoked_elsewhere_is_refused_within_the_bound(cast, clock, settings):
    """Another worker's revocation reaches this one's database, not its memory."""
    settings.API_KEY_CACHE_SECONDS = 5
    assert whoami(cast.acme_key.secret).status_code == HTTPStatus.OK
    ApiKey.objects.filter(pk=cast.acme_key.api_key.pk).update(revoked_at=timezone.now())
    clock.now += 4.9
    assert whoami(cast.acme_key.secret).status_code == HTTPStatus.OK
    clock.now += 0.1
    assert whoami(cast.acme_key.secret).status_code == HTTPStatus.UNAUTHORIZED


def test_a_plan_changed_in_this_worker_applies_at_once(cast, clock, settings):
    settings.RATE_LIMITS_ENABLED = True
    assert whoami(cast.acme_key.secret)["RateLimit-Limit"] == str(cast.acme.effective_rate[1])
    org_set_limits(org=cast.acme, rate_per_minute=60, rate_burst=7)
    assert whoami(cast.acme_key.secret)["RateLimit-Limit"] == "7"


def test_zero_seconds_turns_the_cache_off(cast, clock, lookups, settings):
    settings.API_KEY_CACHE_SECONDS = 0
    for _ in range(3):
        assert whoami(cast.acme_key.secret).status_code == HTTPStatus.OK
    assert len(lookups) == 3


def test_only_authenticated_keys_are_remembered(cast, clock, lookups):
    wrong = cast.acme_key.secret[:-2] + ("aa" if not cast.acme_key.secret.endswith("aa") else "bb")
    for _ in range(2):
        assert whoami(wrong).status_code == HTTPStatus.UNAUTHORIZED
    assert len(lookups) == 2
    assert _remembered() == []


def test_the_cache_is_bounded(cast, clock, monkeypatch):
    monkeypatch.setattr(key_cache, "MAX_ENTRIES", 2)
    secrets = [api_key_issue(org=cast.acme, scopes=["receipts:write"]).secret for _ in range(3)]
    for secret in secrets:
        assert whoami(secret).status_code == HTTPStatus.OK
    assert len(_remembered()) <= 2


def test_a_remembered_key_opens_its_own_org(cast, clock, push, globex_push, settings):
    """Each push writes under row-level security in its key's org: a remembered key opens
    its org's context as a lookup does, alternating orgs on one connection included (as in
    production, a request's statements default to no org at all)."""
    from tests.receipts.factories import Agent

    settings.ORG_CONTEXT_DEFAULT = "none"
    acme, globex = Agent(), Agent()
    try:
        for index in range(3):
            assert push(acme.receipt()).status_code == HTTPStatus.CREATED, index
            assert globex_push(globex.receipt()).status_code == HTTPStatus.CREATED, index
    finally:
        activate_all_orgs()
    assert MirrorEntry.objects.filter(org=cast.acme).count() == 3
    assert MirrorEntry.objects.filter(org=cast.globex).count() == 3


def _remembered() -> list[ApiKey]:
    return [api_key for api_key, _ in key_cache._entries.values()]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # as a request runs: outside any transaction
def test_a_remembered_keys_context_statement_stands_in_for_the_health_check(
    cast, clock, monkeypatch, settings, push, globex_push
):
    """Pushes alternating between orgs switch the connection's org context on each
    request: that statement is the request's first, and Django's health check (a
    ``SELECT 1`` round trip of its own) is not sent as well."""
    import psycopg

    from apps.common.prepared import PipelinedStatement
    from tests.receipts.factories import Agent

    acme, globex = Agent(), Agent()

    settings.ORG_CONTEXT_DEFAULT = "none"
    sent: list[str] = []
    for cls in (psycopg.Cursor, psycopg.ClientCursor):
        real = cls.execute

        def recording(self, query, params=None, *, _real=real, **options):
            sent.append(str(query))
            return _real(self, query, params, **options)

        monkeypatch.setattr(cls, "execute", recording)
    real_connection_execute = psycopg.Connection.execute

    def connection_recording(self, query, params=None, **options):
        sent.append(str(query))
        return real_connection_execute(self, query, params, **options)

    monkeypatch.setattr(psycopg.Connection, "execute", connection_recording)
    real_statement_execute = PipelinedStatement.execute

    def statement_recording(self, query, params, **options):
        sent.append(str(query))
        return real_statement_execute(self, query, params, **options)

    monkeypatch.setattr(PipelinedStatement, "execute", statement_recording)
    try:
        assert push(acme.receipt()).status_code == HTTPStatus.CREATED  # remembered from now
        assert globex_push(globex.receipt()).status_code == HTTPStatus.CREATED
        sent.clear()
        for _ in range(2):
            for pusher, agent in ((push, acme), (globex_push, globex)):
                # What close_old_connections does as a real request starts (the test
                # client leaves it out): the persistent connection's check is due again.
                connection.health_check_done = False
                assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    finally:
        activate_all_orgs()
    assert sum("app.org_ids" in query for query in sent) >= 4
    assert not [query for query in sent if query.strip().upper() == "SELECT 1"]
