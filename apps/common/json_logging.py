"""JSON log lines, and the request id every line written during a request carries.

Imports nothing from Django: gunicorn's master process uses this formatter too
(``deploy/gunicorn.conf.py``), before any Django setup.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

_request_id: ContextVar[str | None] = ContextVar("mirror_request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request being served in this context, if any."""
    return _request_id.get()


def bind_request_id(request_id: str | None) -> None:
    """Bind the id for this request's context (``None`` clears it).

    Bound by the request-log middleware and cleared on ``request_finished`` rather than on
    the way out of the middleware, so the lines Django writes after the middleware chain
    (``Not Found: ...``, ``Internal Server Error: ...``) carry the id too.
    """
    _request_id.set(request_id)


def clear_request_id(**_: object) -> None:
    """``request_finished`` receiver."""
    _request_id.set(None)


def install_request_id_on_records() -> None:
    """Stamp the current request id on every LogRecord when it is created.

    A handler may format a record later or elsewhere (a queue, pytest's caplog), after the
    request is over; the id must be the one current when the line was written.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "stamps_request_id", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if not hasattr(record, "request_id"):
            record.request_id = _request_id.get()
        return record

    factory.stamps_request_id = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_SKIPPED = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "request_id"}
)
_PLAIN = (str, int, float, bool, type(None))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, request_id, extras, exc_info.

    Extras are kept only when they are plain values (or lists/dicts of them): objects such
    as the ``request`` Django attaches to its error records could render headers.
    """

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or current_request_id()
        if request_id:
            payload["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key in _SKIPPED or key.startswith("_") or key in payload:
                continue
            if isinstance(value, _PLAIN) or (
                isinstance(value, list | tuple | dict) and _is_plain(value)
            ):
                payload[key] = value
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def _is_plain(value: object, depth: int = 0) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if depth > 3:
        return False
    if isinstance(value, list | tuple):
        return all(_is_plain(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(
            isinstance(key, str) and _is_plain(item, depth + 1) for key, item in value.items()
        )
    return False


def _database_outage(error: BaseException | None) -> bool:
    """Whether ``error`` is the database being unreachable (the connection refused, lost or
    shut down by the server), not a statement that failed on a working connection."""
    from django.db import utils

    if not isinstance(error, utils.OperationalError | utils.InterfaceError):
        return False
    cause = error.__cause__
    sqlstate = getattr(cause, "sqlstate", None)
    # No SQLSTATE: libpq's own connection failures; class 08: connection exceptions;
    # 57P01-57P03: the server shutting down or not accepting connections yet.
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in {"57P01", "57P02", "57P03"}


class OutageWithoutTraceback(logging.Filter):
    """A background task that failed because the database was unreachable is logged by the
    tasks framework (logger ``django_tasks``) as one line, without its traceback: an outage
    is not a bug, and the worker already says so once per retry (``run_worker``). Requests
    keep their own rule (one traceback per outage, ``apps.common.capacity``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.name.partition(".")[0] == "django_tasks" and _database_outage(error):
            record.msg = f"{record.getMessage()}: database unavailable ({type(error).__name__}: "
            record.msg += f"{str(error).strip().splitlines()[0] if str(error).strip() else ''})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True
