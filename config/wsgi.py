"""WSGI entry point (gunicorn ``config.wsgi:application``).

A bad configuration (a setting the environment gives wrongly, a missing secret) stops the
start with one line naming it on stderr and exit status 3, which gunicorn reports as a
worker that failed to boot. A database that cannot be reached is not a configuration error
here: gunicorn halts when a worker fails to boot, and workers are recycled while serving,
so a database blip would stop the whole server. The worker starts, says so in one line,
and answers 503 with Retry-After until the database is back (DatabaseUnavailableMiddleware).

Once the application and its URL conf are loaded, everything they allocated is moved out
of the garbage collector's reach (``gc.freeze``): it lives as long as the worker, yet every
full collection walked it again. A batch of receipts allocates enough containers to set
off those collections; measured in-process, the collector's time a receipt fell to about
a third (docs/performance/receipts.md). What a request allocates is still collected as before.
"""

import gc
import os
import sys

from django.core.handlers.wsgi import WSGIHandler
from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from config.startup import database_unreachable_line, exit_on_bad_configuration

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")


def _start() -> WSGIHandler:
    handler = get_wsgi_application()
    get_resolver().url_patterns  # noqa: B018  (imports every view before the freeze)
    gc.freeze()
    unreachable = database_unreachable_line()
    if unreachable is not None:
        sys.stderr.write(unreachable.replace("cannot start:", "starts, answering 503:") + "\n")
    return handler


application = exit_on_bad_configuration(_start, status=3)
