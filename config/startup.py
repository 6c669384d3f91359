"""One clear line, not a traceback, when the service cannot start for its configuration.

``manage.py`` and ``config.wsgi`` call :func:`exit_on_bad_configuration` around start-up:
a setting the environment gives wrongly (``ImproperlyConfigured`` from ``config.env``, a
missing secret in production) or a database ``DATABASE_URL`` names but that cannot be
reached is reported as one line naming the setting (and the file, for SQLite), and the
process exits non-zero. Any other error keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from config.env import redacted_url

T = TypeVar("T")

PREFIX = "Countersign cannot start:"


def database_unreachable_line() -> str | None:
    """The line for a database that cannot be connected to, or None when the default
    database connects (the error being handled was then about something else)."""
    from django.conf import settings
    from django.db import connections

    connection = connections["default"]
    try:
        connection.ensure_connection()
    except Exception as failure:
        detail = " ".join(str(failure).split()) or type(failure).__name__
        url = redacted_url(str(getattr(settings, "DATABASE_URL", "")))
        if connection.vendor == "sqlite":
            return (
                f"{PREFIX} DATABASE_URL={url}: cannot open the SQLite file "
                f"{connection.settings_dict['NAME']} ({detail}); does its folder exist and "
                "is it writable?"
            )
        return f"{PREFIX} DATABASE_URL={url}: cannot connect to the database ({detail})."
    finally:
        connection.close()
    return None


def failure_line(error: BaseException) -> str | None:
    """The one line for a configuration failure, or None for any other error."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db.utils import OperationalError

    if isinstance(error, ImproperlyConfigured):
        return f"{PREFIX} {' '.join(str(error).split())}"
    if isinstance(error, OperationalError):
        return database_unreachable_line()
    return None


def fail(line: str, *, status: int) -> NoReturn:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    raise SystemExit(status)


def exit_on_bad_configuration(start: Callable[[], T], *, status: int = 2) -> T:
    """``start()``, or one line on stderr and exit ``status`` for a bad configuration."""
    try:
        return start()
    except Exception as error:
        line = failure_line(error)
        if line is None:
            raise
        fail(line, status=status)
