"""Recently authenticated API keys, remembered in the worker for a few seconds.

Every SDK request presents its key. Resolving it costs a database round trip (the
``SECURITY DEFINER`` resolver) and, before that, a read of the client address's
failed-authentication budget in the shared cache: a large share of a worker's time on a
receipt push (docs/performance/receipts.md). An agent pushes with the same key many times a second,
so each worker keeps the keys it authenticated, by their digest, for
``API_KEY_CACHE_SECONDS`` (5 s by default; 0 turns the cache off).

What that means, and the bound it gives:

* A revoked or rotated key, a changed scope, plan or rate limit takes effect on every
  worker within ``API_KEY_CACHE_SECONDS``. In the worker that made the change it takes
  effect at once: any save or delete of an org or an API key empties this worker's cache.
* A hit skips the failed-authentication budget: a key that authenticated within the
  last seconds is a vouched credential (``credential_limits``), which passes a locked
  address anyway. A guess never authenticated, so it is never here.
* Only keys that authenticated are remembered; a miss goes to the database as before.
  The cache is keyed by the HMAC digest of the presented key, never the key itself, and
  holds at most ``MAX_ENTRIES`` keys (then it starts over).
* ``last_used_at`` is written on a miss, at most once a minute per key, as before.

The org context (row-level security) is opened for a hit as for a database lookup.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db.models.signals import post_delete, post_save

from apps.tenancy.models import ApiKey, Org

MAX_ENTRIES = 10_000

# digest -> (the key with its org, monotonic time until which it may be used)
_entries: dict[str, tuple[ApiKey, float]] = {}


def recall(digest: str) -> ApiKey | None:
    """The key that authenticated with ``digest`` within the last seconds, or None."""
    entry = _entries.get(digest)
    if entry is None:
        return None
    api_key, until = entry
    if time.monotonic() >= until:
        _entries.pop(digest, None)
        return None
    return api_key


def remember(digest: str, api_key: ApiKey) -> None:
    """Remember a key that just authenticated (an active key, its org loaded)."""
    seconds = settings.API_KEY_CACHE_SECONDS
    if seconds <= 0:
        return
    if len(_entries) >= MAX_ENTRIES:
        _entries.clear()
    _entries[digest] = (api_key, time.monotonic() + seconds)


def forget_all(**_: Any) -> None:
    """Empty this worker's cache (an org or a key changed here; tests between cases)."""
    _entries.clear()


def connect_signals() -> None:
    for model in (ApiKey, Org):
        post_save.connect(forget_all, sender=model, dispatch_uid=f"mirror_key_cache_{model}")
        post_delete.connect(forget_all, sender=model, dispatch_uid=f"mirror_key_cache_d{model}")
