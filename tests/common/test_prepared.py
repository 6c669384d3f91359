"""The push path's first statement stands in for Django's per-request health check."""

from __future__ import annotations

import time
from http import HTTPStatus

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction
from rest_framework.test import APIClient

from apps.common.prepared import fetchone_checked, pipelined_transaction
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
def libpq_pipeline(settings) -> None:
    """For a test of what only the libpq mode does (its own prepared statements, its
    statement objects), whichever mode the run is in (``DB_APPEND_PIPELINE``)."""
    settings.DB_APPEND_PIPELINE = "libpq"


@pytest.fixture
def pusher(cast) -> Pusher:
    return ServedPusher(APIClient(), cast.acme_key.secret)


@pytest.fixture
def health_checks(monkeypatch) -> list[str]:
    """Every statement sent only to check the connection (Django's ``SELECT 1``)."""
    sent: list[str] = []
    for cursor_class in (psycopg.Cursor, psycopg.ClientCursor):
        original = cursor_class.execute

        def counting(cursor, query, params=None, *, _original=original, **options):
            if str(query).strip().upper() == "SELECT 1":
                sent.append(str(query))
            return _original(cursor, query, params, **options)

        monkeypatch.setattr(cursor_class, "execute", counting)
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
        # Ended, not only signalled: the session is gone, as before a request arrives.
        deadline = time.monotonic() + 5
        while (
            time.monotonic() < deadline
            and other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
        ):
            time.sleep(0.005)


def test_a_push_sends_no_separate_health_check(pusher, health_checks) -> None:
    agent = Agent()
    for _ in range(3):
        assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    assert connection.health_check_enabled
    assert health_checks == []


def test_the_health_check_sends_nothing_and_finds_a_live_connection_usable(db) -> None:
    connection.ensure_connection()
    assert connection.is_usable()
    assert connection.connection.info.transaction_status == 0


def test_the_health_check_finds_a_connection_the_server_ended(db) -> None:
    connection.ensure_connection()
    raw = connection.connection
    cut_connection()
    assert not connection.is_usable()
    connection.close_if_unusable_or_obsolete()  # what the next request start does
    connection.health_check_done = False
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    assert connection.connection is not raw
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_a_dashboard_request_sends_no_select_1_either(cast, dashboard, health_checks) -> None:
    """Every request that uses the database, not only the push, is spared the round trip."""
    client = dashboard("auditor")
    for _ in range(2):
        close_old_connections()
        assert client.get("/v1/audit/chain?limit=1").status_code == HTTPStatus.OK
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


def prepared_statement_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements")
        return {name for (name,) in cursor.fetchall()}


@pytest.mark.usefixtures("libpq_pipeline")  # psycopg's own statements go at a rollback
def test_a_rollback_of_djangos_keeps_the_push_paths_prepared_statements(cast, pusher) -> None:
    """psycopg answers a rollback with DEALLOCATE ALL once it has prepared anything of its
    own: it never prepares here, so the push path's statements outlive any rollback."""
    agent = Agent()
    assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    before = prepared_statement_names()
    assert before

    def rolled_back() -> None:
        with transaction.atomic():  # the append inside runs on psycopg's cursors
            inside = Pusher(APIClient(), cast.acme_key.secret)  # no close_old_connections
            assert inside(agent.receipt()).status_code == HTTPStatus.CREATED
            raise RuntimeError

    with pytest.raises(RuntimeError):
        rolled_back()
    assert prepared_statement_names() == before
    assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    assert prepared_statement_names() == before


def test_a_statement_the_server_forgot_is_prepared_anew(pusher) -> None:
    """After a DISCARD ALL (an operator's, a pooler's) the next statement fails once, is
    prepared anew and runs; the append after it prepares its own anew too."""
    agent = Agent()
    assert pusher(agent.receipt()).status_code == HTTPStatus.CREATED
    with connection.cursor() as cursor:
        cursor.execute("DISCARD ALL")  # also resets the session's org context
    assert fetchone_checked("SELECT %s::int", [8]) == (8,)
    response = pusher(agent.receipt())
    assert response.status_code == HTTPStatus.CREATED, response.content
    assert response.json()["seq"] == 2


def test_a_pipelined_statements_error_is_djangos_and_the_connection_stays_usable(db) -> None:

    def failing() -> None:
        with pipelined_transaction() as new:
            statement = new()
            statement.execute("SELECT 1 / %s::int", [0])
            statement.fetchone()

    with pytest.raises(DatabaseError, match="division by zero"):
        failing()
    assert connection.connection.info.transaction_status == 0
    assert connection.connection.pgconn.pipeline_status == 0  # out of pipeline mode
    assert fetchone_checked("SELECT %s::int", [9]) == (9,)


def test_a_pipeline_commits_only_when_its_block_ends_without_an_error(db) -> None:
    """Rows are read within the transaction; an exception after a write rolls it back."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE pipeline_probe (n int)")

    def raising_after_a_write() -> None:
        with pipelined_transaction() as new:
            new().execute("INSERT INTO pipeline_probe VALUES (%s)", [1])
            counted = new()
            counted.execute("SELECT count(*) FROM pipeline_probe", [])
            assert counted.fetchone() == (1,)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        raising_after_a_write()
    with pipelined_transaction() as new:
        new().execute("INSERT INTO pipeline_probe VALUES (%s)", [2])
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM pipeline_probe")
        assert cursor.fetchall() == [(2,)]


def test_a_commit_that_fails_at_the_sync_raises_and_writes_nothing(db) -> None:
    """A deferred constraint is checked by the commit itself, at the pipeline's Sync: its
    error is the block's, as Django's IntegrityError, and the connection stays usable."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE probe_parent (id int PRIMARY KEY)")
        cursor.execute(
            "CREATE TEMPORARY TABLE probe_child (parent int REFERENCES probe_parent "
            "DEFERRABLE INITIALLY DEFERRED)"
        )

    def orphan() -> None:
        with pipelined_transaction() as new:
            new().execute("INSERT INTO probe_child VALUES (%s)", [1])

    with pytest.raises(IntegrityError):
        orphan()
    assert connection.connection.info.transaction_status == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM probe_child")
        assert cursor.fetchone() == (0,)


@pytest.mark.usefixtures("libpq_pipeline")
def test_a_connection_keeps_a_bounded_number_of_prepared_statements(db, monkeypatch) -> None:
    """Old statements (an earlier plan generation's) are deallocated as new ones come."""
    from apps.common import prepared

    monkeypatch.setattr(prepared, "_MAX_PREPARED", 2)
    for value in range(5):
        assert fetchone_checked(f"SELECT %s::int + {value}", [1]) == (1 + value,)
    names = prepared_statement_names()
    assert len(names) == 2
    assert set(prepared._prepared_by_connection[connection.connection].names.values()) == {
        name.encode() for name in names
    }
    assert fetchone_checked("SELECT %s::int + 4", [2]) == (6,)  # still prepared: reused
    assert prepared_statement_names() == names


def _probe_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE guard_probe (n int)")


def _probe_rows() -> list[tuple[int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT n FROM guard_probe")
        return cursor.fetchall()


def _through_djangos_cursor() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _through_the_orm() -> None:
    from apps.tenancy.models import Org

    Org.objects.count()


def _through_this_module() -> None:
    fetchone_checked("SELECT %s::int", [1])


def _a_nested_pipeline() -> None:
    with pipelined_transaction() as new:
        new().execute("SELECT 1", [])


def _an_event(cast) -> None:
    from apps.common import outbound

    outbound.emit(org_id=cast.acme.pk, event_type="quota.threshold", payload=dict)


@pytest.mark.parametrize(
    "intruder",
    [
        _through_djangos_cursor,
        _through_the_orm,
        _through_this_module,
        _a_nested_pipeline,
        _an_event,
    ],
)
def test_any_other_statement_inside_a_pipeline_is_a_programming_error(cast, intruder) -> None:
    """Not a database error (that would be answered 503, on every retry): the block
    raises StatementInPipeline, rolls back what it sent, and the connection stays usable."""
    from apps.common.prepared import StatementInPipeline
    from apps.events.subscriptions import forget_subscribers

    forget_subscribers()  # the event sink asks the database who subscribes
    _probe_table()

    def intruding() -> None:
        with pipelined_transaction() as new:
            new().execute("INSERT INTO guard_probe VALUES (%s)", [1])
            if intruder is _an_event:
                intruder(cast)
            else:
                intruder()

    with pytest.raises(StatementInPipeline):
        intruding()
    assert connection.connection.pgconn.pipeline_status == 0
    assert connection.connection.info.transaction_status == 0
    assert _probe_rows() == []
    assert fetchone_checked("SELECT %s::int", [3]) == (3,)
    with pipelined_transaction() as new:
        new().execute("INSERT INTO guard_probe VALUES (%s)", [2])
    assert _probe_rows() == [(2,)]
