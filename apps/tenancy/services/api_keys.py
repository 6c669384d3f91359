"""Writes for API keys: issuing, rotating and revoking them.

Each operator act takes the :class:`~apps.tenancy.audit_trail.Actor` who makes it and writes it
into the org's audit trail (:func:`org_audit_record`) in the same transaction.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.common import outbound
from apps.common.errors import InvalidInput, NotFound
from apps.common.timestamps import utc_text
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import ApiKey, AuditKind, Org, Scope

# Issued keys look like ``hk_3f9a1c2b7d4e_<43 url-safe characters>``: the first
# KEY_PREFIX_LENGTH characters are the public lookup prefix.
KEY_PREFIX_TAG = "hk_"
KEY_PREFIX_LENGTH = len(KEY_PREFIX_TAG) + 12


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    secret: str  # shown exactly once, never stored


def key_digest(secret: str) -> str:
    return hmac.new(settings.API_KEY_DIGEST_SECRET.encode(), secret.encode(), "sha256").hexdigest()


def _validated_scopes(scopes: Iterable[str]) -> list[str]:
    valid = set(Scope.values)
    wanted = [scope.strip() for scope in scopes if scope.strip()]
    unknown = sorted(set(wanted) - valid)
    if unknown:
        raise InvalidInput(
            f"unknown scope(s) {', '.join(unknown)}; known: {', '.join(Scope.values)}"
        )
    if not wanted:
        raise InvalidInput("an API key needs at least one scope")
    return sorted(set(wanted))


def _api_key_event(event_type: str, api_key: ApiKey) -> None:
    outbound.emit(
        org_id=api_key.org_id,
        event_type=event_type,
        payload=lambda: {
            "prefix": api_key.prefix,
            "label": api_key.label,
            "scopes": list(api_key.scopes),
            "created_at": utc_text(api_key.created_at),
            "revoked_at": utc_text(api_key.revoked_at),
        },
    )


def _key_detail(api_key: ApiKey) -> dict[str, Any]:
    return {"prefix": api_key.prefix, "label": api_key.label, "scopes": list(api_key.scopes)}


def api_key_issue(
    *, org: Org, scopes: Iterable[str], label: str = "", actor: Actor = OPERATOR
) -> IssuedKey:
    prefix = KEY_PREFIX_TAG + secrets.token_hex(6)
    secret = f"{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        api_key = ApiKey.objects.create(
            org=org,
            label=label,
            prefix=prefix,
            digest=key_digest(secret),
            scopes=_validated_scopes(scopes),
        )
        org_audit_record(
            org=org, kind=AuditKind.API_KEY_ISSUED, actor=actor,
            summary=f"API key {prefix} issued", detail=_key_detail(api_key),
        )  # fmt: skip
        _api_key_event("api_key.created", api_key)
    return IssuedKey(api_key=api_key, secret=secret)


def api_key_rotate(*, prefix: str, actor: Actor = OPERATOR) -> IssuedKey:
    """A new key with the same org, label and scopes, and the old one revoked, together."""
    with transaction.atomic():
        old = ApiKey.objects.select_for_update().filter(prefix=prefix).first()
        if old is None:
            raise NotFound(f"no API key with prefix {prefix!r}")
        if old.revoked_at is not None:
            raise InvalidInput(f"API key {prefix} is revoked; issue a new one instead")
        issued = api_key_issue(org=old.org, scopes=old.scopes, label=old.label, actor=actor)
        old.revoked_at = timezone.now()
        old.save(update_fields=["revoked_at"])
        org_audit_record(
            org=old.org_id, kind=AuditKind.API_KEY_ROTATED, actor=actor,
            summary=f"API key {prefix} rotated: revoked, replaced by {issued.api_key.prefix}",
            detail={**_key_detail(old), "replaced_by": issued.api_key.prefix},
        )  # fmt: skip
        _api_key_event("api_key.revoked", old)
    return issued


def api_key_revoke(*, prefix: str, actor: Actor = OPERATOR) -> ApiKey:
    with transaction.atomic():
        api_key = ApiKey.objects.select_for_update().filter(prefix=prefix).first()
        if api_key is None:
            raise NotFound(f"no API key with prefix {prefix!r}")
        if api_key.revoked_at is None:
            api_key.revoked_at = timezone.now()
            api_key.save(update_fields=["revoked_at"])
            org_audit_record(
                org=api_key.org_id, kind=AuditKind.API_KEY_REVOKED, actor=actor,
                summary=f"API key {prefix} revoked", detail=_key_detail(api_key),
            )  # fmt: skip
            _api_key_event("api_key.revoked", api_key)
    return api_key
