"""A real database outage (the server's port closed under a running worker): every answer
is 503 with ``Retry-After`` in the profile's body, logged as one line; the traceback is
logged once per outage, with its first failure, and again only after the database
answered in between."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client
from rest_framework.test import APIClient

from apps.common import capacity
from tests.receipts.factories import Agent, as_text
from tests.teampath_fixtures import TeamPathCaller

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

MESSAGE = "the database is briefly unavailable; retry shortly"


def closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Outage:
    """Points this worker's database connection at a closed port, and back."""

    def __init__(self) -> None:
        self.settings = connection.settings_dict
        self.real = (self.settings["HOST"], self.settings["PORT"])

    def begin(self) -> None:
        connection.close()  # the server is gone: the next statement reconnects, and fails
        self.settings["HOST"], self.settings["PORT"] = "127.0.0.1", str(closed_port())

    def end(self) -> None:
        self.settings["HOST"], self.settings["PORT"] = self.real
        connection.close()


@pytest.fixture
def outage(cast: Any) -> Iterator[Outage]:
    capacity.outage.end()  # whatever an earlier test left: the database answers now
    down = Outage()
    try:
        yield down
    finally:
        down.end()


def served(call: Callable[[], Any]) -> Any:
    close_old_connections()  # as a request starts under a real server
    return call()


def outage_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "apps.common.capacity"]


def keyscoped_push(cast: Any) -> Callable[[], Any]:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=cast.acme_key.secret)
    agent = Agent()

    def push() -> Any:
        body = '{"receipt":' + as_text(agent.receipt()) + "}"
        return client.generic("POST", "/v1/receipts", body, content_type="application/json")

    return push


def test_an_outage_logs_one_line_per_answer_and_one_traceback(cast, outage, caplog) -> None:
    push = keyscoped_push(cast)
    assert served(push).status_code == HTTPStatus.CREATED  # the key is remembered now
    caplog.clear()
    outage.begin()
    answers = [served(push) for _ in range(12)]
    assert {answer.status_code for answer in answers} == {HTTPStatus.SERVICE_UNAVAILABLE}
    for answer in answers:
        assert answer.json() == {"detail": MESSAGE}
        assert answer["Retry-After"] == "2"
    records = outage_records(caplog)
    assert len(records) == len(answers)
    assert all(record.levelname == "WARNING" for record in records)
    assert [record.exc_info is not None for record in records] == [True] + [False] * 11
    for record in records:
        assert "\n" not in record.getMessage()
        assert "OperationalError" in record.getMessage()
    # Nothing else logs the answers again with their traceback (Django's 5xx handler).
    assert not [r for r in caplog.records if r.exc_info and r.name != "apps.common.capacity"]


def test_the_next_outage_after_the_database_answered_logs_its_traceback_again(
    cast, outage, caplog
) -> None:
    push = keyscoped_push(cast)
    outage.begin()
    for _ in range(3):
        assert served(push).status_code == HTTPStatus.SERVICE_UNAVAILABLE
    outage.end()
    assert served(push).status_code == HTTPStatus.CREATED
    outage.begin()
    for _ in range(3):
        assert served(push).status_code == HTTPStatus.SERVICE_UNAVAILABLE
    traced = [record.exc_info is not None for record in outage_records(caplog)]
    assert traced == [True, False, False, True, False, False]


@pytest.mark.urls("config.urls.teampath")
@pytest.mark.usefixtures("teampath_profile")
def test_the_team_path_answers_in_its_body_with_retry_after_and_logs_alike(
    cast, outage, caplog
) -> None:
    acme = TeamPathCaller(cast.acme_key.secret)
    agent = Agent()
    assert served(lambda: acme.push(agent.receipt())).status_code == HTTPStatus.CREATED
    caplog.clear()
    outage.begin()
    answers = [
        served(lambda: acme.push(agent.receipt())),
        served(lambda: acme.batch([agent.receipt()])),
        served(lambda: acme.get("/v1/teams/acme/policy")),
    ]
    for answer in answers:
        assert answer.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert answer.json() == {"error": "over_capacity", "message": MESSAGE}
        assert answer["Retry-After"] == "2"
    assert [r.exc_info is not None for r in outage_records(caplog)] == [True, False, False]


def test_a_failure_raised_outside_the_view_is_answered_and_logged_alike(
    cast, outage, caplog, admin_user
) -> None:
    """The admin loads its user in a middleware: Django answers that failure itself (its
    500 handler), which must neither log a traceback of its own per answer nor stay 500."""
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    outage.begin()
    answers = [served(lambda: client.get("/admin/")) for _ in range(3)]
    for answer in answers:
        assert answer.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert answer.json() == {"detail": MESSAGE}
        assert answer["Retry-After"] == "2"
    assert [r.exc_info is not None for r in outage_records(caplog)] == [True, False, False]
    assert not [r for r in caplog.records if r.exc_info and r.name != "apps.common.capacity"]


def test_readiness_probes_through_an_outage_log_one_traceback(cast, outage, caplog) -> None:
    """A probe every few seconds fails each time: one line each, the traceback once."""
    client = APIClient()
    assert served(lambda: client.get("/readyz")).status_code == HTTPStatus.OK
    caplog.clear()
    outage.begin()
    probes = [served(lambda: client.get("/readyz")) for _ in range(4)]
    assert {probe.status_code for probe in probes} == {HTTPStatus.SERVICE_UNAVAILABLE}
    assert all(probe["Retry-After"] == "2" for probe in probes)
    failed = [r for r in caplog.records if "readiness check" in r.getMessage()]
    assert len(failed) >= len(probes)
    assert [r.exc_info is not None for r in failed].count(True) == 1
    assert failed[0].exc_info is not None
    assert all("\n" not in r.getMessage() for r in failed)
