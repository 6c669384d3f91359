"""Request ids and JSON access lines: one per request, never a credential."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus

import pytest

from apps.common.json_logging import JsonFormatter, bind_request_id, current_request_id
from apps.common.request_log import ACCESS_LOGGER, accepted_request_id

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.common.urls")]


def access_records(caplog):
    return [record for record in caplog.records if record.name == ACCESS_LOGGER]


def rendered(caplog) -> list[str]:
    formatter = JsonFormatter()
    return [formatter.format(record) for record in caplog.records]


def test_an_authenticated_request_logs_one_line_without_the_key_and_with_the_request_id(
    api_client, cast, caplog
):
    secret = cast.acme_key.secret
    with caplog.at_level(logging.INFO):
        response = api_client.get(
            "/test/whoami",
            HTTP_X_API_KEY=secret,
            HTTP_AUTHORIZATION=f"Bearer {secret}",
            HTTP_X_REQUEST_ID="trace-42.a_b",
        )
    assert response.status_code == HTTPStatus.OK
    assert response["X-Request-ID"] == "trace-42.a_b"
    lines = rendered(caplog)
    assert lines, "nothing was logged"
    assert all(secret not in line for line in lines)
    assert all(secret[:15] not in line for line in lines)  # not even the key's prefix
    (access,) = access_records(caplog)
    line = json.loads(JsonFormatter().format(access))
    assert line["request_id"] == "trace-42.a_b"
    assert line["method"] == "GET"
    assert line["route"] == "test-whoami"
    assert line["status"] == HTTPStatus.OK
    assert line["org"] == "acme"
    assert isinstance(line["duration_ms"], float)
    assert "authorization" not in " ".join(lines).lower()


def test_application_lines_written_during_the_request_carry_its_id(api_client, cast, caplog):
    with caplog.at_level(logging.INFO):
        api_client.get("/test/whoami", HTTP_X_API_KEY=cast.acme_key.secret, HTTP_X_REQUEST_ID="abc")
    (view_line,) = [r for r in caplog.records if r.name == "tests.common.views"]
    assert json.loads(JsonFormatter().format(view_line))["request_id"] == "abc"


def test_djangos_own_error_lines_carry_the_request_id_too(api_client, caplog):
    with caplog.at_level(logging.INFO):
        response = api_client.get("/no/such/path", HTTP_X_REQUEST_ID="lost-1")
    assert response.status_code == HTTPStatus.NOT_FOUND
    (not_found,) = [r for r in caplog.records if r.name == "django.request"]
    assert json.loads(JsonFormatter().format(not_found))["request_id"] == "lost-1"


def test_the_id_is_cleared_once_the_request_is_finished(api_client):
    api_client.get("/healthz", HTTP_X_REQUEST_ID="done-1")
    assert current_request_id() is None


def test_a_request_without_an_id_gets_a_fresh_uuid4_hex(api_client, caplog):
    with caplog.at_level(logging.INFO):
        first = api_client.get("/healthz")["X-Request-ID"]
        second = api_client.get("/healthz")["X-Request-ID"]
    assert len(first) == 32
    assert set(first) <= set("0123456789abcdef")
    assert first != second
    assert [json.loads(line)["request_id"] for line in rendered(caplog)] == [first, second]


@pytest.mark.parametrize(
    "presented",
    ["", "x" * 129, "has space", 'quote"d', "new\nline", "ünïcode", "semi;colon", "a/b"],
)
def test_an_insane_request_id_is_replaced(presented):
    accepted = accepted_request_id(presented)
    assert accepted != presented
    assert len(accepted) == 32


@pytest.mark.parametrize("presented", ["a", "x" * 128, "A-Z.a_z-0.9", "0f" * 16])
def test_a_sane_request_id_is_kept(presented):
    assert accepted_request_id(presented) == presented


def test_the_route_is_the_pattern_never_the_raw_path_with_ids(api_client, cast, caplog):
    with caplog.at_level(logging.INFO):
        api_client.get("/test/orgs/9876/items/secret-item", HTTP_X_API_KEY=cast.acme_key.secret)
    (access,) = access_records(caplog)
    line = JsonFormatter().format(access)
    assert json.loads(line)["route"] == "test/orgs/<int:org_id>/items/<slug:item>"
    assert "9876" not in line
    assert "secret-item" not in line


def test_an_unrouted_path_is_logged_as_unmatched(api_client, caplog):
    with caplog.at_level(logging.INFO):
        api_client.get("/wp-admin/setup.php?token=abc")
    (access,) = access_records(caplog)
    line = JsonFormatter().format(access)
    assert json.loads(line)["route"] == "unmatched"
    assert "token=abc" not in line


def test_an_unauthenticated_request_has_no_org(api_client, caplog):
    with caplog.at_level(logging.INFO):
        api_client.get("/test/whoami", HTTP_X_API_KEY="hk_000000000000_wrong")
    (access,) = access_records(caplog)
    line = json.loads(JsonFormatter().format(access))
    assert line["status"] == HTTPStatus.UNAUTHORIZED
    assert "org" not in line


def test_a_console_session_logs_its_org(api_client, cast, caplog):
    api_client.login(username="acme-auditor", password="pw-auditor")
    token = api_client.post("/v1/console/token", {"org": "acme"}, format="json").json()
    access_token = token.get("access")
    assert access_token
    api_client.logout()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        api_client.get("/test/dashboard-whoami", HTTP_AUTHORIZATION=f"Bearer {access_token}")
    (access,) = access_records(caplog)
    line = JsonFormatter().format(access)
    assert json.loads(line)["org"] == "acme"
    assert access_token not in line


class TestTheFormatter:
    def test_it_renders_one_json_object_per_line_with_plain_extras(self):
        record = logging.LogRecord("x.y", logging.WARNING, __file__, 1, "a %s", ("b",), None)
        record.count = 3
        record.request = object()  # Django attaches the request: never rendered
        line = JsonFormatter().format(record)
        assert "\n" not in line
        payload = json.loads(line)
        assert payload["message"] == "a b"
        assert payload["level"] == "WARNING"
        assert payload["logger"] == "x.y"
        assert payload["count"] == 3
        assert "request" not in payload

    def test_it_renders_exceptions_inside_the_object(self):
        try:
            raise ValueError("boom")
        except ValueError:
            import sys

            record = logging.LogRecord("x", logging.ERROR, __file__, 1, "m", None, sys.exc_info())
        payload = json.loads(JsonFormatter().format(record))
        assert "ValueError: boom" in payload["exc_info"]

    def test_it_carries_the_bound_request_id(self):
        bind_request_id("bound-7")
        try:
            record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
            assert json.loads(JsonFormatter().format(record))["request_id"] == "bound-7"
        finally:
            bind_request_id(None)
