"""Authenticating a presented API key: the lookup every SDK request runs (by its public
prefix, then its digest), and the worker's cache of keys it already authenticated."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from apps.tenancy import key_cache
from apps.tenancy.models import ApiKey, Org
from apps.tenancy.org_context import activate_orgs, lookup_api_key
from apps.tenancy.services.api_keys import KEY_PREFIX_LENGTH, KEY_PREFIX_TAG, key_digest

# Writing last_used_at on every request would put a row update on the hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)

# Every SDK request runs this lookup; as one plain statement it costs a fraction of the
# equivalent ORM query (select_related compilation showed up on the push path).
_KEY_LOOKUP = (
    "SELECT k.id, k.label, k.prefix, k.digest, k.scopes, k.created_at, k.last_used_at, "  # noqa: S608
    "k.revoked_at, o.id, o.slug, o.name, o.plan, o.monthly_receipt_cap, o.created_at, "
    "o.rate_per_minute, o.rate_burst "
    f"FROM {ApiKey._meta.db_table} k JOIN {Org._meta.db_table} o ON o.id = k.org_id "
    "WHERE k.prefix = %s"
)


def _aware(value: datetime | str | None) -> datetime | None:
    """SQLite hands raw queries naive (or text) datetimes; they are UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _api_key_by_prefix(prefix: str, digest: str) -> ApiKey | None:
    """The key named by ``prefix``. On PostgreSQL the key's org is not known yet, so
    row-level security would hide the row: the lookup goes through the SECURITY DEFINER
    resolver, which also opens the org context of an active key matching ``digest``."""
    if connection.vendor == "postgresql":
        row = lookup_api_key(prefix=prefix, digest=digest)
    else:
        with connection.cursor() as cursor:
            cursor.execute(_KEY_LOOKUP, [prefix])
            row = cursor.fetchone()
    if row is None:
        return None
    key_id, label, key_prefix, digest, scopes = row[:5]
    created, last_used, revoked = (_aware(value) for value in row[5:8])
    org_id, slug, name, plan, cap = row[8:13]
    org_created = _aware(row[13])
    rate_per_minute, rate_burst = row[14:16]
    assert created is not None  # NOT NULL column
    assert org_created is not None  # NOT NULL column
    org = Org(id=org_id, slug=slug, name=name, plan=plan, monthly_receipt_cap=cap,
              created_at=org_created, rate_per_minute=rate_per_minute,
              rate_burst=rate_burst)  # fmt: skip
    return ApiKey(
        id=key_id, org=org, label=label, prefix=key_prefix, digest=digest,
        scopes=json.loads(scopes) if isinstance(scopes, str) else scopes,
        created_at=created, last_used_at=last_used, revoked_at=revoked,
    )  # fmt: skip


def api_key_authenticate(*, presented: str) -> ApiKey | None:
    """The active key matching ``presented``, or None. One indexed lookup by prefix.

    A match also limits the database session to the key's org (row-level security), in the
    same round trip on PostgreSQL.
    """
    if not _well_formed(presented):
        return None
    digest = key_digest(presented)
    api_key = _api_key_by_prefix(presented[:KEY_PREFIX_LENGTH], digest)
    if api_key is None or not hmac.compare_digest(api_key.digest, digest):
        return None
    if api_key.revoked_at is not None:
        return None
    activate_orgs([api_key.org.pk])  # already open on PostgreSQL: no round trip
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    key_cache.remember(digest, api_key)
    return api_key


def api_key_recall(*, presented: str) -> ApiKey | None:
    """The key ``presented`` if it authenticated in this worker within the last
    ``API_KEY_CACHE_SECONDS`` (``key_cache``), its org context opened; None otherwise (then
    :func:`api_key_authenticate` decides). No database or cache round trip, except the org
    context's when this connection had another."""
    if not _well_formed(presented):
        return None
    api_key = key_cache.recall(key_digest(presented))
    if api_key is not None:
        activate_orgs([api_key.org.pk])
    return api_key


def _well_formed(presented: str) -> bool:
    return len(presented) > KEY_PREFIX_LENGTH and presented.startswith(KEY_PREFIX_TAG)
