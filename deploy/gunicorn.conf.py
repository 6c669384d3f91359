"""gunicorn settings: sync workers, one per core (the service is CPU-bound on verification)."""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count()))
worker_class = "sync"
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
# Recycle workers now and then to bound any slow leak; jitter avoids restarting all at once.
max_requests = 20_000
max_requests_jitter = 2_000
accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-") or None
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%({x-request-id}i)s"'
errorlog = "-"
