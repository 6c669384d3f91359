"""Writes for orgs, API keys and memberships. Commands, the admin and APIs all call these."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from apps.common.errors import InvalidInput, NotFound
from apps.tenancy.models import ApiKey, Membership, Org, Plan, Role, Scope

# Issued keys look like ``hk_3f9a1c2b7d4e_<43 url-safe characters>``: the first
# KEY_PREFIX_LENGTH characters are the public lookup prefix.
KEY_PREFIX_TAG = "hk_"
KEY_PREFIX_LENGTH = len(KEY_PREFIX_TAG) + 12
# Writing last_used_at on every request would put a row update on the hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)


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


def org_create(*, slug: str, name: str | None = None, plan: str = Plan.FREE) -> Org:
    if plan not in Plan.values:
        raise InvalidInput(f"unknown plan {plan!r}; known: {', '.join(Plan.values)}")
    if Org.objects.filter(slug=slug).exists():
        raise InvalidInput(f"an org with slug {slug!r} already exists")
    org = Org(slug=slug, name=name or slug, plan=plan)
    org.full_clean()
    org.save()
    return org


def api_key_issue(*, org: Org, scopes: Iterable[str], label: str = "") -> IssuedKey:
    prefix = KEY_PREFIX_TAG + secrets.token_hex(6)
    secret = f"{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey.objects.create(
        org=org,
        label=label,
        prefix=prefix,
        digest=key_digest(secret),
        scopes=_validated_scopes(scopes),
    )
    return IssuedKey(api_key=api_key, secret=secret)


def api_key_revoke(*, prefix: str) -> ApiKey:
    with transaction.atomic():
        api_key = ApiKey.objects.select_for_update().filter(prefix=prefix).first()
        if api_key is None:
            raise NotFound(f"no API key with prefix {prefix!r}")
        if api_key.revoked_at is None:
            api_key.revoked_at = timezone.now()
            api_key.save(update_fields=["revoked_at"])
    return api_key


def api_key_authenticate(*, presented: str) -> ApiKey | None:
    """The active key matching ``presented``, or None. One indexed lookup by prefix."""
    if len(presented) <= KEY_PREFIX_LENGTH or not presented.startswith(KEY_PREFIX_TAG):
        return None
    api_key = (
        ApiKey.objects.select_related("org").filter(prefix=presented[:KEY_PREFIX_LENGTH]).first()
    )
    if api_key is None or not hmac.compare_digest(api_key.digest, key_digest(presented)):
        return None
    if api_key.revoked_at is not None:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


def membership_add(
    *, org: Org, username: str, role: str, password: str | None = None
) -> Membership:
    """Give ``username`` the ``role`` in ``org``, creating the console user if needed.

    Members get staff status so they can sign in to the console (the Django admin).
    """
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; known: {', '.join(Role.values)}")
    user_model = get_user_model()
    with transaction.atomic():
        user, _ = user_model.objects.get_or_create(username=username)
        if password is not None:
            user.set_password(password)
        elif not user.has_usable_password():
            user.set_unusable_password()
        user.is_staff = True
        user.save()
        membership, _ = Membership.objects.update_or_create(
            user=user, org=org, defaults={"role": role}
        )
    return membership


def org_set_limits(*, org: Org, monthly_receipt_cap: int | None) -> Org:
    """Override (or, with None, reset to the plan's default) the org's monthly cap."""
    if monthly_receipt_cap is not None and monthly_receipt_cap < 0:
        raise InvalidInput("the monthly cap cannot be negative")
    org.monthly_receipt_cap = monthly_receipt_cap
    org.save(update_fields=["monthly_receipt_cap"])
    return org
