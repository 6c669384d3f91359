"""The push path's first statement stands in for Django's per-request health check."""

from __future__ import annotations

from http import HTTPStatus

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, connections
from rest_framework.test import APIClient

from apps.common.prepared import fetchone_checked
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class ServedPusher(Pusher):
    """Each push starts as a request does under a real server: Django's test client leaves
    out ``close_old_connections``, which is what re-arms the per-request health check."""

    def __call__(self, *args, **kwargs):
        close_old_connections()
        return super().__call__(*args, **kwargs)


@pytest.fixture
def pusher(cast) -> Pusher:
    return ServedPusher(APIClient(), cast.acme_key.secret)


@pytest.fixture
def health_checks(monkeypatch) -> list[str]:
    """Every ``SELECT 1`` health check Django sends."""
    sent: list[str] = []
    wrapper_class = type(connections["default"])
    original = wrapper_class.is_usable

    def counting(wrapper) -> bool:
        sent.append(wrapper.alias)
        return original(wrapper)

    monkeypatch.setattr(wrapper_class, "is_usable", counting)
    return sent


def cut_connection() -> None:
    """The server ends this process's database session, as a restart or a proxy would."""
    pid = connection.connection.info.backend_pid
    owner = settings.DATABASES["default"] | {"CONN_MAX_AGE": 0}
    with psycopg.connect(
        host=owner["HOST"] or None,
        port=owner["PORT"] or None,
        user=owner["USER"],
        dbname=connection.settings_dict["NAME"],
        password=owner.get("PASSWORD") or None,
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_push_sends_no_separate_health_check(pusher, health_checks) -> None:
    agent = Agent()
    for _ in range(3):
        assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    assert connection.health_check_enabled
    assert health_checks == []


def test_a_push_on_a_connection_the_server_cut_reconnects_and_succeeds(pusher) -> None:
    agent = Agent()
    assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    old = connection.connection
    cut_connection()
    response = pusher(agent.receipt())
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["seq"] == 2
    assert connection.connection is not old


def test_a_failing_statement_on_a_live_connection_is_not_retried(db) -> None:
    connection.close()
    connection.ensure_connection()
    connection.health_check_done = False
    raw = connection.connection
    with pytest.raises(DatabaseError):
        fetchone_checked("SELECT 1 / %s::int", [0])
    assert connection.connection is raw  # not closed and reopened
    assert connection.health_check_done
    assert fetchone_checked("SELECT %s::int", [7]) == (7,)
