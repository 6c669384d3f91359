"""gunicorn settings: sync workers, one per core (the service is CPU-bound on verification).

Environment (see .env.example): GUNICORN_BIND, GUNICORN_WORKERS (or WEB_CONCURRENCY;
default: one per core), GUNICORN_TIMEOUT, GUNICORN_ACCESSLOG, GUNICORN_CONTROL_SOCKET,
PROMETHEUS_MULTIPROC_DIR.

More than one worker needs REDIS_URL (rate limits are counted in the shared cache); the
system check mirror.E001 refuses to start otherwise.

Timeouts nest: PostgreSQL cancels a statement after DB_STATEMENT_TIMEOUT_MS (5 s, answered
503), gunicorn kills a worker stuck for GUNICORN_TIMEOUT (30 s), and nginx gives up on the
upstream after proxy_read_timeout (35 s, deploy/nginx.conf), so each layer answers before
the one in front of it.
"""

import gc
import multiprocessing
import os
from pathlib import Path
from typing import Any

from gunicorn.glogging import Logger


def _workers() -> int:
    for name in ("GUNICORN_WORKERS", "WEB_CONCURRENCY"):
        value = os.environ.get(name, "").strip()
        if value:
            return int(value)
    return multiprocessing.cpu_count()


bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = _workers()
worker_class = "sync"
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
# Recycle workers now and then to bound any slow leak; jitter avoids restarting all at once.
max_requests = 20_000
max_requests_jitter = 2_000

# The application writes one JSON access line per request (logger mirror.access, with the
# route name, org and request id), so gunicorn's own access log is off unless
# GUNICORN_ACCESSLOG names a destination ("-" is stdout). When on, it is JSON too; the
# request id is the one the application answered with (validated), never the raw header.
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None

# gunicorn (25.1+) opens a control socket for `gunicornc` by default, under
# $XDG_RUNTIME_DIR or $HOME/.gunicorn: two instances on one host would claim the same path.
# Off unless GUNICORN_CONTROL_SOCKET names a path of this instance's own.
_control_socket_path = os.environ.get("GUNICORN_CONTROL_SOCKET", "").strip()
control_socket_disable = not _control_socket_path
if _control_socket_path:
    control_socket = _control_socket_path


class MirrorLogger(Logger):
    """gunicorn's logger, with its access log on only when ``accesslog`` names a
    destination. gunicorn itself turns the access log on whenever ``logconfig_dict`` is
    set (as below, for JSON lines), which would write a second line per request."""

    @property
    def access_log_enabled(self) -> bool:
        return bool(self.cfg.accesslog)

    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        if self.cfg.accesslog:
            super().access(resp, req, environ, request_time)


logger_class = MirrorLogger
access_log_format = (
    '{"logger":"gunicorn.access","remote":"%(h)s","method":"%(m)s","path":"%(U)s",'
    '"status":"%(s)s","bytes":"%(B)s","duration_ms":"%(M)s",'
    '"request_id":"%({x-request-id}o)s"}'
)
errorlog = "-"
# gunicorn's own lines (start, worker boot/exit, timeouts) as JSON like the application's.
logconfig_dict = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "apps.common.json_logging.JsonFormatter"},
        "plain": {"format": "%(message)s"},
    },
    "handlers": {
        "error": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": "json",
        },
        "access": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": "plain",
        },
    },
    "root": {"handlers": ["error"], "level": "INFO"},
    "loggers": {
        "gunicorn.error": {"handlers": ["error"], "level": "INFO", "propagate": False},
        "gunicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
    },
}

# Prometheus across workers: with PROMETHEUS_MULTIPROC_DIR set (an empty directory the
# service can write, e.g. /run/mirror/prometheus), each worker writes its metric values to
# files there and /metrics sums them. The directory is emptied at start so counters from a
# previous run do not leak in, and an exited worker's files are marked dead.
_multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


def on_starting(server: Any) -> None:
    if _multiproc_dir:
        directory = Path(_multiproc_dir)
        directory.mkdir(parents=True, exist_ok=True)
        # Only prometheus-client's own files: never anything else that may live there.
        for stale in directory.glob("*.db"):
            stale.unlink()


def child_exit(server: Any, worker: Any) -> None:
    if _multiproc_dir:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker: Any) -> None:
    """The worker has loaded the application: what start-up allocated (modules, settings,
    URL confs, the admin's registry) moves out of the cyclic garbage collector's reach.
    Otherwise each full collection walks it again and stalls the request it interrupts,
    about one in fifty, by 100 ms and more (docs/performance/reads.md); with it frozen, the
    console's p99 at 10 million entries stays under 100 ms."""
    gc.collect()
    gc.freeze()
