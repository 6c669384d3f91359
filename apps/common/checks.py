"""Deployment invariants as system checks with stable ids (each tested in tests/common).

- ``mirror.E001``: several gunicorn workers (``GUNICORN_WORKERS`` / ``WEB_CONCURRENCY`` > 1)
  need a shared cache (``REDIS_URL``): rate limits counted in each worker's local memory
  would let a client through at the limit times the worker count.
- ``mirror.I001`` (``--deploy``): no worker count set, so gunicorn starts one worker per
  core, and there is more than one core but no shared cache.
- ``mirror.W001``: metrics enabled with several workers but no ``PROMETHEUS_MULTIPROC_DIR``:
  each scrape would see the counters of whichever worker answered.
- ``mirror.W002`` (``--deploy``): ``SECRETS_ENCRYPTION_KEYS`` is unset, so the secrets
  stored encrypted are encrypted with a key derived from ``SECRET_KEY``: rotating it would
  make them unreadable, and a backup holds the key beside the data it protects.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Info, Warning

from apps.common.encryption import keys_are_derived

_PER_PROCESS_CACHES = frozenset(
    {
        "django.core.cache.backends.locmem.LocMemCache",
        "django.core.cache.backends.dummy.DummyCache",
    }
)


def _cache_is_per_process() -> bool:
    return settings.CACHES["default"]["BACKEND"] in _PER_PROCESS_CACHES


def shared_cache_for_workers(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    workers: int = settings.WEB_WORKERS
    if workers > 1 and _cache_is_per_process():
        return [
            Error(
                f"{workers} gunicorn workers (GUNICORN_WORKERS/WEB_CONCURRENCY) with a "
                "per-process cache: rate limits would be counted per worker.",
                hint="Set REDIS_URL to the shared Redis, or run a single worker.",
                id="mirror.E001",
            )
        ]
    return []


def default_worker_count(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    cores = os.cpu_count() or 1
    if settings.WEB_WORKERS == 0 and cores > 1 and _cache_is_per_process():
        return [
            Info(
                f"GUNICORN_WORKERS is unset, so deploy/gunicorn.conf.py starts one worker per "
                f"core ({cores}) and REDIS_URL is unset: rate limits are counted per worker.",
                hint="Set REDIS_URL (compose.yaml does), or GUNICORN_WORKERS=1.",
                id="mirror.I001",
            )
        ]
    return []


def metrics_across_workers(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    workers: int = settings.WEB_WORKERS or os.cpu_count() or 1
    if settings.METRICS_ENABLED and workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return [
            Warning(
                "METRICS_ENABLED with several gunicorn workers and no PROMETHEUS_MULTIPROC_DIR: "
                "each scrape shows only the worker that answered it.",
                hint="Set PROMETHEUS_MULTIPROC_DIR to an empty, writable directory "
                "(see deploy/gunicorn.conf.py).",
                id="mirror.W001",
            )
        ]
    return []


def secrets_key_derived(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if keys_are_derived():
        return [
            Warning(
                "SECRETS_ENCRYPTION_KEYS is unset: webhook and single sign-on secrets are "
                "encrypted with a key derived from SECRET_KEY, so rotating SECRET_KEY would "
                "make them unreadable.",
                hint="Set SECRETS_ENCRYPTION_KEYS to a Fernet key kept apart from the "
                "database and its backups (docs/production.md).",
                id="mirror.W002",
            )
        ]
    return []
