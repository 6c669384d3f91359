"""Single sign-on to the console with an org's OpenID Connect provider: who may come in,
as which account, with which role.

The claims reach :func:`sso_sign_in` verified (signature, issuer, audience, expiry, nonce:
``apps.tenancy.sso``). The rules, each one tested:

* the email must be in one of the org's allowed domains (and not marked unverified);
* the account is the one linked to the provider's subject at the first sign-in
  (:class:`SsoIdentity`); a first sign-in links an existing account only when it belongs to
  this org alone (a member, or invited) and is no superuser, else it makes a new one;
* the role is the highest one whose group is in the groups claim, else the org's default
  role, else the role of a pending invitation (accepted now), else, when the org maps no
  groups at all, the role held; none: refused. Read at every sign-in, so a change at the
  provider applies at the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from apps.common.encryption import Sealed
from apps.common.errors import DomainError, Forbidden, InvalidInput
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.middleware import member_org_ids
from apps.tenancy.models import (
    AuditKind,
    Invitation,
    Membership,
    Org,
    Role,
    SsoConfig,
    SsoIdentity,
)
from apps.tenancy.org_context import activate_orgs
from apps.tenancy.services.invitations import account_for_email
from apps.tenancy.services.memberships import acting_role


class SsoRefused(DomainError):
    """The provider vouched for someone this org does not let in (or its answer is not
    one to trust)."""

    status = HTTPStatus.FORBIDDEN
    code = "sso_refused"


def sso_org(key: str) -> Org | None:
    """The org whose enabled single sign-on ``key`` names (its slug, or an email domain
    exactly one org allows), with this connection limited to it. On PostgreSQL through the
    SECURITY DEFINER resolver of tenancy's migration 0016: nobody is signed in yet."""
    key = key.strip().rpartition("@")[2].lower() if "@" in key else key.strip()
    if not key:
        return None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT mirror_sso_org(%s)", [key])
            row = cursor.fetchone()
        org_id = None if row is None or row[0] is None else int(row[0])
    else:
        enabled = SsoConfig.objects.filter(enabled=True)
        by_slug = enabled.filter(org__slug=key).values_list("org_id", flat=True).first()
        by_domain = [c.org_id for c in enabled if key.lower() in c.allowed_domains]
        org_id = by_slug or (by_domain[0] if len(by_domain) == 1 else None)
    if org_id is None:
        return None
    activate_orgs([org_id])
    return Org.objects.filter(pk=org_id).first()


def mapped_role(config: SsoConfig, claims: dict[str, Any]) -> Role | None:
    """The highest role whose group is in the claims' groups claim (compared through the
    roles' own ordering, so a role added above the others needs no change here)."""
    groups = claims.get(config.groups_claim) or []
    if isinstance(groups, str):
        groups = [groups]
    held = {group for group in groups if isinstance(group, str)}
    best: Role | None = None
    for role_name, group in (config.role_groups or {}).items():
        if role_name in Role.values and group in held:
            role = Role(role_name)
            if best is None or role.at_least(best):
                best = role
    return best


def _email(config: SsoConfig, claims: dict[str, Any]) -> str:
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise SsoRefused("the provider gave no email address")
    if claims.get("email_verified") is False:
        raise SsoRefused(f"the provider has not verified {email}")
    domain = email.rpartition("@")[2].lower()
    if domain not in [allowed.lower() for allowed in config.allowed_domains]:
        raise SsoRefused(
            f"{domain} is not an email domain allowed to sign in to {config.org.name} "
            "with single sign-on"
        )
    return email


def _account(
    *, config: SsoConfig, issuer: str, subject: str, email: str
) -> tuple[AbstractBaseUser, SsoIdentity]:
    org = config.org
    identity = (
        SsoIdentity.objects.select_related("user")
        .filter(org=org, issuer=issuer, subject=subject)
        .first()
    )
    if identity is not None:
        return identity.user, identity
    user = account_for_email(email)
    if user is None:
        user_model = get_user_model()
        user = user_model(**{user_model.USERNAME_FIELD: email}, email=email, is_staff=True)
        user.set_unusable_password()  # this account signs in through the provider
        user.save()
    else:
        # Linking an existing account hands it to this org's provider: only an account
        # that is this org's alone (a member or invited) and no operator's.
        # Every org of the account, whatever this connection's org context (row-level
        # security would show this org's memberships only).
        orgs = set(member_org_ids(int(user.pk)))
        invited = (
            Invitation.objects.pending_at(timezone.now())
            .filter(org=org, email__iexact=email)
            .exists()
        )
        if getattr(user, "is_superuser", False) or orgs - {org.pk} or not (orgs or invited):
            raise SsoRefused(
                f"an account for {email} exists that this org's single sign-on may not take "
                "over: sign in with its password"
            )
    identity = SsoIdentity.objects.create(org=org, issuer=issuer, subject=subject, user_id=user.pk)
    return user, identity


@dataclass(frozen=True)
class SignedIn:
    user: AbstractBaseUser
    membership: Membership


def sso_sign_in(*, config: SsoConfig, issuer: str, claims: dict[str, Any]) -> SignedIn:
    """Let the person the verified ``claims`` describe into ``config.org`` (see the module
    doc for the rules), in one transaction with its audit rows."""
    org = config.org
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SsoRefused("the provider gave no subject")
    email = _email(config, claims)
    now = timezone.now()
    with transaction.atomic():
        Org.objects.select_for_update().filter(pk=org.pk).values_list("pk", flat=True).first()
        user, identity = _account(config=config, issuer=issuer, subject=subject, email=email)
        if not user.is_active:
            raise SsoRefused(f"the account {user.get_username()} is deactivated")
        actor = Actor.console(user)
        membership = Membership.objects.select_for_update().filter(org=org, user_id=user.pk).first()
        invitation = (
            Invitation.objects.pending_at(now)
            .select_for_update()
            .filter(org=org, email__iexact=email)
            .order_by("-sent_at")
            .first()
        )  # fmt: skip
        role = mapped_role(config, claims)
        source = "the provider's groups"
        if role is None and config.default_role:
            role, source = Role(config.default_role), "the org's default role"
        if role is None and invitation is not None:
            role, source = Role(invitation.role), "the invitation"
        if role is None and not config.role_groups and membership is not None:
            role, source = Role(membership.role), "the role held"
        if role is None:
            raise SsoRefused(
                f"{email} is in none of the provider's groups that map to a role in {org.name}"
            )
        username = user.get_username()
        if membership is None:
            membership = Membership.objects.create(org=org, user_id=user.pk, role=role)
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ADDED, actor=actor,
                summary=f"{username} added as {role.value} by single sign-on",
                detail={"username": username, "role": role.value, "from": source},
            )  # fmt: skip
        elif membership.role != role:
            previous = membership.role
            membership.role = role
            membership.save(update_fields=["role"])
            org_audit_record(
                org=org, kind=AuditKind.MEMBERSHIP_ROLE_CHANGED, actor=actor,
                summary=f"{username} is now {role.value} (was {previous}) by single sign-on",
                detail={"username": username, "role": role.value, "previous_role": previous,
                        "from": source},
            )  # fmt: skip
        if invitation is not None:
            invitation.accepted_at = now
            invitation.accepted_by_id = user.pk
            invitation.save(update_fields=["accepted_at", "accepted_by"])
            org_audit_record(
                org=org, kind=AuditKind.INVITATION_ACCEPTED, actor=actor,
                summary=f"{email} accepted the invitation by single sign-on as {role.value}",
                detail={"invitation": invitation.pk, "email": email, "role": role.value},
            )  # fmt: skip
        identity.last_sign_in_at = now
        identity.save(update_fields=["last_sign_in_at"])
        org_audit_record(
            org=org, kind=AuditKind.SSO_SIGNED_IN, actor=actor,
            summary=f"{username} signed in with single sign-on as {role.value}",
            detail={"username": username, "email": email, "role": role.value,
                    "issuer": issuer, "subject": subject, "from": source},
        )  # fmt: skip
    return SignedIn(user=user, membership=membership)


def sso_refusal_record(*, org: Org, reason: str, email: str = "") -> None:
    """A refused single sign-on, in the org's audit trail (its own transaction: the sign-in
    wrote nothing)."""
    org_audit_record(
        org=org, kind=AuditKind.SSO_REFUSED, actor=Actor(via="console", name=email[:150]),
        summary=f"single sign-on refused: {reason}", detail={"email": email, "reason": reason},
    )  # fmt: skip


def _clean_domains(domains: list[str]) -> list[str]:
    cleaned = sorted({domain.strip().lower().lstrip("@") for domain in domains if domain.strip()})
    if not cleaned:
        raise InvalidInput("allow at least one email domain")
    return cleaned


def sso_configure(
    *, org: Org, issuer: str, client_id: str, client_secret: str | Sealed,
    allowed_domains: list[str],
    role_groups: dict[str, str] | None = None, groups_claim: str = "groups",
    default_role: str = "", scopes: str = "openid email profile", enabled: bool = True,
    actor: Actor,
) -> SsoConfig:  # fmt: skip
    """Set ``org``'s single sign-on (owners only: it decides who comes in, as what).
    ``client_secret`` is clear, or the one stored kept as it is (``Sealed``)."""
    if actor.user is not None:
        own = acting_role(actor.user, org)
        if own is None or not own.at_least(Role.OWNER):
            raise Forbidden(f"single sign-on of {org} is set by its owners")
    unknown = set(role_groups or {}) - set(Role.values)
    if unknown or (default_role and default_role not in Role.values):
        raise InvalidInput(f"unknown role(s): {', '.join(sorted(unknown) or [default_role])}")
    if "openid" not in scopes.split():
        raise InvalidInput("the scopes must include openid")
    values = {
        "issuer": issuer.rstrip("/"), "client_id": client_id, "client_secret": client_secret,
        "allowed_domains": _clean_domains(allowed_domains), "role_groups": role_groups or {},
        "groups_claim": groups_claim, "default_role": default_role, "scopes": scopes,
        "enabled": enabled,
    }  # fmt: skip
    with transaction.atomic():
        config, _ = SsoConfig.objects.update_or_create(org=org, defaults=values)
        shown = {key: value for key, value in values.items() if key != "client_secret"}
        org_audit_record(
            org=org, kind=AuditKind.SSO_CONFIGURED, actor=actor,
            summary=f"single sign-on set to {config.issuer}", detail=shown,
        )  # fmt: skip
    return config
