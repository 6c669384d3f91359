"""Reads for tenancy; every read takes the org explicitly."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.common.errors import NotFound
from apps.tenancy.models import ApiKey, Org


def org_get(*, slug: str) -> Org:
    org = Org.objects.filter(slug=slug).first()
    if org is None:
        raise NotFound(f"no org with slug {slug!r}")
    return org


def api_key_list(*, org: Org) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(org=org).order_by("created_at", "prefix")
