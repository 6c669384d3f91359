"""A background task that failed because the database was unreachable logs one line, no
traceback (an outage is not a bug); a statement that failed on a working connection, and
any other logger's record, keep their traceback."""

from __future__ import annotations

import json
import logging
import sys

import psycopg
from django.db import utils

from apps.common.json_logging import JsonFormatter, OutageWithoutTraceback


def logged(error: BaseException, logger: str = "django_tasks") -> dict:
    try:
        raise error
    except BaseException:
        record = logging.LogRecord(
            logger, logging.ERROR, __file__, 1, "Task id=%s state=FAILED", ("t1",),
            sys.exc_info(),
        )  # fmt: skip
    assert OutageWithoutTraceback().filter(record)
    line: dict = json.loads(JsonFormatter().format(record))
    return line


def wrapped(django_error: type[Exception], cause: Exception) -> Exception:
    error = django_error(str(cause))
    error.__cause__ = cause
    return error


def test_a_lost_connection_is_one_line_without_a_traceback() -> None:
    lost = psycopg.OperationalError("server closed the connection unexpectedly")
    line = logged(wrapped(utils.OperationalError, lost))
    assert "exc_info" not in line
    assert line["message"] == (
        "Task id=t1 state=FAILED: database unavailable "
        "(OperationalError: server closed the connection unexpectedly)"
    )
    closed = logged(wrapped(utils.InterfaceError, psycopg.InterfaceError("connection closed")))
    assert "exc_info" not in closed


def test_a_failed_statement_keeps_its_traceback() -> None:
    cancelled = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
    line = logged(wrapped(utils.OperationalError, cancelled))
    assert "Traceback" in line["exc_info"]
    assert line["message"] == "Task id=t1 state=FAILED"
    assert "Traceback" in logged(ValueError("a bug"))["exc_info"]
    lost = wrapped(utils.OperationalError, psycopg.OperationalError("connection refused"))
    assert "Traceback" in logged(lost, logger="django.request")["exc_info"]
