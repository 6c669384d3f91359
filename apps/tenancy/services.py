"""Writes for orgs, API keys and memberships. Commands, the admin and APIs all call these.

Each operator act takes the :class:`~apps.tenancy.audit_trail.Actor` who makes it and writes it
into the org's audit trail (:func:`org_audit_record`) in the same transaction.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import connection, transaction
from django.utils import timezone

from apps.common import outbound
from apps.common.errors import DomainError, Forbidden, InvalidInput, NotFound
from apps.tenancy import key_cache
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.console_tokens import console_org_sessions_end
from apps.tenancy.models import (
    ApiKey,
    AuditKind,
    Membership,
    Org,
    Plan,
    Role,
    Scope,
)
from apps.tenancy.org_context import activate_orgs, lookup_api_key

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


def org_create(
    *, slug: str, name: str | None = None, plan: str = Plan.FREE, actor: Actor = OPERATOR
) -> Org:
    if plan not in Plan.values:
        raise InvalidInput(f"unknown plan {plan!r}; known: {', '.join(Plan.values)}")
    if Org.objects.filter(slug=slug).exists():
        raise InvalidInput(f"an org with slug {slug!r} already exists")
    org = Org(slug=slug, name=name or slug, plan=plan)
    org.full_clean()
    with transaction.atomic():
        org.save()
        org_audit_record(
            org=org, kind=AuditKind.ORG_CREATED, actor=actor,
            summary=f"org {slug} created ({plan} plan)",
            detail={"slug": slug, "name": org.name, "plan": plan},
        )  # fmt: skip
    return org


def _api_key_event(event_type: str, api_key: ApiKey) -> None:
    outbound.emit(
        org_id=api_key.org_id,
        event_type=event_type,
        payload=lambda: {
            "prefix": api_key.prefix,
            "label": api_key.label,
            "scopes": list(api_key.scopes),
            "created_at": api_key.created_at.isoformat().replace("+00:00", "Z"),
            "revoked_at": (
                api_key.revoked_at.isoformat().replace("+00:00", "Z")
                if api_key.revoked_at
                else None
            ),
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


class LastOwner(DomainError):
    """An org keeps at least one owner: its last one is neither demoted nor removed."""

    status = HTTPStatus.CONFLICT
    code = "last_owner"


def _acting_role(actor: AbstractBaseUser | AnonymousUser, org: Org) -> Role | None:
    if getattr(actor, "is_superuser", False):  # operators hold every org
        return Role.OWNER
    if actor.pk is None:
        return None
    roles = Membership.objects.filter(user_id=actor.pk, org=org).values_list("role", flat=True)
    current = roles.first()
    return Role(current) if current is not None else None


def _check_membership_change(
    *,
    org: Org,
    username: str,
    membership: Membership | None,
    role: Role | None,
    actor: Actor,
) -> None:
    """The one rule for every change of a membership (added, role changed, removed: ``role``
    None): nobody grants, changes or removes a role above their own, and the last owner of
    an org stays one. An actor without a user is an operator (a management command)."""
    current = Role(membership.role) if membership is not None else None
    if actor.user is not None:
        own = _acting_role(actor.user, org)
        if own is None or not own.at_least(Role.MANAGER):
            raise Forbidden(f"changing members of {org} needs the manager role")
        if role is not None and not own.at_least(role):
            raise Forbidden(f"a {own.label.lower()} cannot grant the {role.value} role")
        if current is not None and not own.at_least(current):
            act = "remove" if role is None else "change the role of"
            raise Forbidden(f"a {own.label.lower()} cannot {act} an {current.value}")
    if membership is not None and current == Role.OWNER and role != Role.OWNER:
        others = Membership.objects.filter(org=org, role=Role.OWNER).exclude(pk=membership.pk)
        if not others.exists():
            act = "removed" if role is None else "demoted"
            raise LastOwner(
                f"{username} is the last owner of {org} and cannot be {act}; "
                "make another member owner first"
            )


def _locked_membership(*, org: Org, username: str) -> Membership | None:
    """The membership, locked, with its org locked first: every membership change of one
    org is serialized, so two concurrent demotions cannot both see another owner."""
    Org.objects.select_for_update().filter(pk=org.pk).values_list("pk", flat=True).first()
    return (
        Membership.objects.select_for_update()
        .select_related("user")
        .filter(org=org, user__username=username)
        .first()
    )


def _check_existing_account_joins(*, org: Org, username: str, actor: Actor) -> None:
    """An existing account joins an org with consent: today a superuser's (or an operator's
    command), later the account's own by accepting an invitation. An org's managers create
    new accounts only: adding someone else's account would let any org's manager act on a
    user they do not manage (and end that user's session tokens by removing them again)."""
    if actor.user is None or getattr(actor.user, "is_superuser", False):
        return
    raise Forbidden(
        f"{username} already has an account: an existing account joins {org} by invitation "
        "(until invitations exist, a superuser adds it); choose a new username to create one"
    )


def membership_add(
    *,
    org: Org,
    username: str,
    role: str,
    password: str | None = None,
    actor: Actor = OPERATOR,
) -> Membership:
    """Give ``username`` the ``role`` in ``org`` (a new membership or a changed role),
    creating the console user if needed; a console user acting is held to
    :func:`_check_membership_change` (an operator at the command line is not), and adds an
    existing account to an org only as a superuser (:func:`_check_existing_account_joins`).

    A new account gets staff status so it can sign in to the console (the Django admin); an
    existing account's staff and superuser flags are never changed by joining an org.
    """
    if role not in Role.values:
        raise InvalidInput(f"unknown role {role!r}; known: {', '.join(Role.values)}")
    user_model = get_user_model()
    with transaction.atomic():
        existing = _locked_membership(org=org, username=username)
        _check_membership_change(
            org=org, username=username, membership=existing, role=Role(role), actor=actor
        )
        user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: username}).first()
        if user is None:
            user = user_model(**{user_model.USERNAME_FIELD: username}, is_staff=True)
            if password is not None:
                user.set_password(password)
            else:
                user.set_unusable_password()
            user.save()
        else:
            if existing is None:
                _check_existing_account_joins(org=org, username=username, actor=actor)
            if password is not None:
                user.set_password(password)  # a changed password ends the user's session tokens
                user.save(update_fields=["password"])
        detail = {"username": username, "role": role}
        if existing is None:
            membership = Membership.objects.create(user=user, org=org, role=role)
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ADDED, actor=actor, detail=detail,
                summary=f"{username} added as {role}",
            )  # fmt: skip
        else:
            membership = existing
            if membership.role != role:
                detail["previous_role"] = membership.role
                membership.role = role
                membership.save(update_fields=["role"])
                org_audit_record(
                    org=org, kind=AuditKind.MEMBERSHIP_ROLE_CHANGED, actor=actor, detail=detail,
                    summary=f"{username} is now {role} (was {detail['previous_role']})",
                )  # fmt: skip
    return membership


def membership_remove(*, org: Org, username: str, actor: Actor = OPERATOR) -> Membership:
    """Take ``username`` out of ``org`` (same rule as :func:`membership_add`) and end the
    user's session tokens for ``org``: what this org granted, and nothing else (the user's
    tokens for other orgs are not this org's to end)."""
    with transaction.atomic():
        membership = _locked_membership(org=org, username=username)
        if membership is None:
            raise NotFound(f"{username} is not a member of {org}")
        _check_membership_change(
            org=org, username=username, membership=membership, role=None, actor=actor
        )
        membership.delete()
        console_org_sessions_end(user_id=membership.user_id, org_id=org.pk)
        org_audit_record(
            org=org, kind=AuditKind.MEMBERSHIP_REMOVED, actor=actor,
            summary=f"{username} removed (was {membership.role})",
            detail={"username": username, "role": membership.role},
        )  # fmt: skip
    return membership


_UNCHANGED: Any = object()


def org_set_limits(
    *,
    org: Org,
    monthly_receipt_cap: int | None = _UNCHANGED,
    rate_per_minute: int | None = _UNCHANGED,
    rate_burst: int | None = _UNCHANGED,
    plan: str = _UNCHANGED,
    actor: Actor = OPERATOR,
) -> Org:
    """Set the org's plan and override its limits; None resets a limit to the plan's
    default, an omitted one is left as it is. Only what changes is saved and audited."""
    if plan is not _UNCHANGED and plan not in Plan.values:
        raise InvalidInput(f"unknown plan {plan!r}; known: {', '.join(Plan.values)}")
    changes = {
        name: value
        for name, value in (
            ("plan", plan),
            ("monthly_receipt_cap", monthly_receipt_cap),
            ("rate_per_minute", rate_per_minute),
            ("rate_burst", rate_burst),
        )
        if value is not _UNCHANGED and getattr(org, name) != value
    }
    if monthly_receipt_cap not in (None, _UNCHANGED) and monthly_receipt_cap < 0:
        raise InvalidInput("the monthly cap cannot be negative")
    for name, rate in (("rate_per_minute", rate_per_minute), ("rate_burst", rate_burst)):
        if rate not in (None, _UNCHANGED) and rate < 1:
            raise InvalidInput(f"{name.replace('_', ' ')} must be at least 1")
    for name, value in changes.items():
        setattr(org, name, value)
    if changes:
        with transaction.atomic():
            org.save(update_fields=list(changes))
            shown = ", ".join(f"{name} {value}" for name, value in changes.items())
            org_audit_record(
                org=org, kind=AuditKind.ORG_LIMITS_SET, actor=actor, detail=changes,
                summary=f"limits set: {shown}",
            )  # fmt: skip
    return org
