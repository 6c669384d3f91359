"""503 when briefly at capacity: database unavailable, statement timeout, concurrency."""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from apps.common.capacity import ConcurrencyLimitMiddleware, DatabaseUnavailableMiddleware
from tests.common.urls import HALF_WRITTEN
from tests.conftest import is_postgres

pytestmark = pytest.mark.urls("tests.common.urls")

KEYSCOPED_BODY = {"detail": "the database is briefly unavailable; retry shortly"}
TEAMPATH_BODY = {
    "error": "over_capacity",
    "message": "the database is briefly unavailable; retry shortly",
}


def database_down():
    return mock.patch.object(
        BaseDatabaseWrapper,
        "ensure_connection",
        side_effect=OperationalError("connection refused"),
    )


@pytest.fixture
def teampath(settings):
    settings.API_PROFILE = "teampath"
    return settings


@pytest.mark.django_db
class TestDatabaseUnavailable:
    def test_an_sdk_request_gets_503_with_retry_after_then_recovers(
        self, api_client, cast, settings
    ):
        settings.RETRY_AFTER_SECONDS = 4
        key = cast.acme_key.secret
        with database_down():
            response = api_client.get("/test/whoami", HTTP_X_API_KEY=key)
        assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert response["Retry-After"] == "4"
        assert response.json() == KEYSCOPED_BODY
        assert response["X-Request-ID"]
        recovered = api_client.get("/test/whoami", HTTP_X_API_KEY=key)
        assert recovered.status_code == HTTPStatus.OK
        assert recovered.json() == {"org": "acme"}

    def test_the_team_path_profile_answers_in_its_own_body(self, api_client, cast, teampath):
        with database_down():
            response = api_client.get("/test/whoami", HTTP_X_API_KEY=cast.acme_key.secret)
        assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert response.json() == TEAMPATH_BODY
        assert response["Retry-After"] == "2"

    def test_the_receipt_push_route_gets_503_then_201(self, api_client, cast):
        from tests.receipts.factories import Agent, as_text

        body = '{"receipt":' + as_text(Agent().receipt()) + "}"

        def push():
            return api_client.generic(
                "POST",
                "/v1/receipts",
                body,
                content_type="application/json",
                HTTP_X_API_KEY=cast.acme_key.secret,
            )

        with database_down():
            refused = push()
        assert refused.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert refused.json() == KEYSCOPED_BODY
        assert push().status_code == HTTPStatus.CREATED

    @pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
    def test_the_admin_gets_503_too(self, settings, admin_user, profile):
        settings.API_PROFILE = profile
        # The admin's user is loaded lazily, perhaps by a middleware before any view runs:
        # Django then answers 500 and fires got_request_exception, which the test client
        # would re-raise; the response is what matters here.
        client = Client(raise_request_exception=False)
        client.force_login(admin_user)
        with database_down():
            response = client.get("/admin/")
        assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert response.json() == (KEYSCOPED_BODY if profile == "keyscoped" else TEAMPATH_BODY)
        assert client.get("/admin/").status_code == HTTPStatus.OK

    def test_a_plain_django_view_is_covered(self, api_client):
        response = api_client.get("/test/plain-failing")
        assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE

    def test_nothing_half_written_stays_behind(self, api_client):
        response = api_client.post("/test/half-write")
        assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert not get_user_model().objects.filter(username=HALF_WRITTEN).exists()

    def test_it_is_logged_as_a_warning_with_the_cause(self, api_client, caplog):
        from apps.common.capacity import outage

        outage.end()  # a healthy period before: this failure begins an outage
        api_client.get("/test/plain-failing", HTTP_X_REQUEST_ID="db-down-1")
        (record,) = [r for r in caplog.records if r.name == "apps.common.capacity"]
        assert record.levelname == "WARNING"
        assert record.exc_info is not None
        assert record.request_id == "db-down-1"
        # Not logged a second time, louder, by Django's handler of 5xx answers.
        assert not [r for r in caplog.records if r.name == "django.request"]

    def test_other_errors_stay_500(self):
        response = APIClient(raise_request_exception=False).get("/test/plain-bug")
        assert response.status_code == HTTPStatus.INTERNAL_SERVER_ERROR

    def test_a_service_unavailable_domain_error_carries_retry_after(self, api_client):
        response = api_client.get("/test/refuses")
        assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert response.json() == {"detail": "the approvals backlog is full"}
        assert response["Retry-After"] == "2"


def test_an_error_raised_by_an_inner_middleware_is_503_too(settings):
    """Not a view: Django turns it into a 500 first; the outer middleware corrects it."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.common.test_capacity.FailingMiddleware"]
    response = Client(raise_request_exception=False).get("/healthz")
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert response["Retry-After"] == "2"
    assert response.json() == KEYSCOPED_BODY


class FailingMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        raise OperationalError("could not connect to server")


def test_a_genuine_500_is_left_alone():
    middleware = DatabaseUnavailableMiddleware(lambda request: HttpResponse(status=500))
    assert middleware(RequestFactory().get("/")).status_code == 500
    assert middleware.process_exception(RequestFactory().get("/"), ValueError()) is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_dead_postgresql_port_is_503_and_the_next_request_after_it_returns_is_200(cast):
    client = APIClient()
    key = cast.acme_key.secret
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT="1")
    try:
        response = client.get("/test/whoami", HTTP_X_API_KEY=key)
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert response["Retry-After"] == "2"
    assert response.json() == KEYSCOPED_BODY
    assert client.get("/test/whoami", HTTP_X_API_KEY=key).status_code == HTTPStatus.OK


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_statement_past_statement_timeout_is_503_and_rolls_back(api_client):
    assert is_postgres()
    response = api_client.post("/test/slow-statement")
    assert response.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert response.json() == KEYSCOPED_BODY
    assert not get_user_model().objects.filter(username=HALF_WRITTEN).exists()


@pytest.mark.postgres
@pytest.mark.django_db
def test_connections_carry_the_configured_statement_timeout(settings):
    assert settings.DATABASES["default"]["OPTIONS"]["connect_timeout"] == 5
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "5s"


def body(response: HttpResponseBase) -> bytes:
    assert isinstance(response, HttpResponse)
    return response.content


class TestConcurrencyLimit:
    def ok(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse("ok")

    def test_zero_turns_it_off(self, settings):
        from django.core.exceptions import MiddlewareNotUsed

        settings.MAX_CONCURRENT_REQUESTS = 0
        with pytest.raises(MiddlewareNotUsed):
            ConcurrencyLimitMiddleware(self.ok)

    def test_over_the_ceiling_it_answers_503_at_once_in_the_profile_body(self, settings):
        settings.MAX_CONCURRENT_REQUESTS = 1
        answers = []

        def nested(request):
            # A second request arrives while the first still holds the only slot.
            answers.append(middleware(RequestFactory().get("/v1/receipts")))
            return HttpResponse("first")

        middleware = ConcurrencyLimitMiddleware(nested)
        first = middleware(RequestFactory().get("/v1/receipts"))
        assert body(first) == b"first"
        (second,) = answers
        assert second.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert second["Retry-After"] == "2"
        assert json.loads(body(second)) == {"detail": "the server is at capacity; retry shortly"}

        settings.API_PROFILE = "teampath"
        answers.clear()
        middleware(RequestFactory().get("/v1/receipts"))
        assert json.loads(body(answers[0]))["error"] == "over_capacity"

    def test_slots_are_released_even_when_the_view_fails(self, settings):
        settings.MAX_CONCURRENT_REQUESTS = 1

        def failing(request):
            raise RuntimeError("boom")

        middleware = ConcurrencyLimitMiddleware(failing)
        for _ in range(3):
            with pytest.raises(RuntimeError):
                middleware(RequestFactory().get("/"))
        middleware.get_response = self.ok
        assert middleware(RequestFactory().get("/")).status_code == HTTPStatus.OK

    def test_probes_are_exempt(self, settings):
        settings.MAX_CONCURRENT_REQUESTS = 1
        answers = []

        def nested(request):
            if request.path_info != "/readyz":
                answers.append(middleware(RequestFactory().get("/readyz")))
            return HttpResponse("answered")

        middleware = ConcurrencyLimitMiddleware(nested)
        middleware(RequestFactory().get("/v1/receipts"))
        assert answers[0].status_code == HTTPStatus.OK

    def test_threads_beyond_the_ceiling_are_refused_through_the_whole_stack(self, settings):
        settings.MAX_CONCURRENT_REQUESTS = 2
        settings.MIDDLEWARE = [
            *settings.MIDDLEWARE,
            "tests.common.test_capacity.BlockingMiddleware",
        ]
        BlockingMiddleware.entered = threading.Semaphore(0)
        BlockingMiddleware.release = threading.Event()
        client = Client()
        client.get("/healthz")  # load the middleware chain once: one per process in production
        results: list[int] = []

        def call():
            own = Client()
            own.handler = client.handler  # the same middleware instances, as in one worker
            results.append(own.get("/test/plain-ok").status_code)

        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        for _ in threads:
            assert BlockingMiddleware.entered.acquire(timeout=5)
        third = client.get("/test/plain-ok")
        BlockingMiddleware.release.set()
        for thread in threads:
            thread.join(timeout=5)
        assert third.status_code == HTTPStatus.SERVICE_UNAVAILABLE
        assert sorted(results) == [HTTPStatus.NOT_FOUND, HTTPStatus.NOT_FOUND]


class BlockingMiddleware:
    entered: threading.Semaphore
    release: threading.Event

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info == "/test/plain-ok":
            self.entered.release()
            self.release.wait(timeout=5)
        return self.get_response(request)
