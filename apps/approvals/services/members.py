"""What an org's identity provider decides about a person reaches their approver keys too:
deprovisioning ends the membership, the sessions and the approver keys in one transaction.

Approver keys are tied to a person through :func:`approver_keys_of_member` (today the
account that registered the key, ``ApproverKey.created_by``; the one place to change when
keys name their member).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Q, QuerySet

from apps.approvals.models import ApproverKey
from apps.approvals.services.keys import approver_key_revoke
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.middleware import member_org_ids
from apps.tenancy.models import AuditKind, Membership, Org, ScimUser
from apps.tenancy.services import membership_remove
from apps.tenancy.services.scim import scim_membership_set, scim_role, scim_user_forget


def approver_keys_of_member(*, org: Org, user_id: int) -> QuerySet[ApproverKey]:
    """The approver keys of ``org`` that belong to the person ``user_id`` and are not
    revoked (pending ones too): those bound to them (enrolled from their browser, or bound
    by an administrator), and those they registered themselves for no one else."""
    return ApproverKey.objects.filter(
        Q(member_id=user_id) | Q(member__isnull=True, created_by_id=user_id),
        org=org,
        revoked_at__isnull=True,
    )


@dataclass(frozen=True)
class Deprovisioned:
    membership_removed: bool
    keys_revoked: list[str]
    account_deactivated: bool


def member_deprovision(
    *, org: Org, user: AbstractBaseUser, actor: Actor, reason: str
) -> Deprovisioned:
    """Take the person out of ``org``, in one transaction recorded in its audit trail:
    their membership (with the org's session tokens), their approver keys, and, when the
    account belongs to no other org and is no operator's, the account itself (deactivated:
    every console session and session token of it ends)."""
    name = user.get_username()
    with transaction.atomic():
        membership = Membership.objects.filter(org=org, user_id=user.pk).first()
        if membership is not None:
            membership_remove(org=org, username=name, actor=actor)
        revoked = []
        for key in approver_keys_of_member(org=org, user_id=int(user.pk)):
            approver_key_revoke(org=org, key_id=key.key_id, actor=actor)
            revoked.append(key.key_id)
        # Every org of the account, whatever this connection's org context (row-level
        # security would show this org's memberships only).
        elsewhere = bool(set(member_org_ids(int(user.pk))) - {org.pk})
        deactivate = user.is_active and not elsewhere and not getattr(user, "is_superuser", False)
        if deactivate:
            # Deactivation ends every session token (console_tokens' signal) and Django
            # refuses the account's console sessions from the next request.
            account = get_user_model()._default_manager.get(pk=user.pk)
            account.is_active = False
            account.save(update_fields=["is_active"])
        org_audit_record(
            org=org, kind=AuditKind.MEMBER_DEPROVISIONED, actor=actor,
            summary=f"{name} deprovisioned ({reason}): membership "
            f"{'removed' if membership else 'none'}, {len(revoked)} approver key(s) revoked"
            f"{', account deactivated' if deactivate else ''}",
            detail={"username": name, "reason": reason, "approver_keys": revoked,
                    "membership_removed": membership is not None,
                    "account_deactivated": deactivate},
        )  # fmt: skip
    return Deprovisioned(membership is not None, revoked, deactivate)


def member_provisioning_apply(*, scim_user: ScimUser, actor: Actor) -> None:
    """Give the provisioned person the membership their groups and state say: the role
    their groups give while active, else deprovisioned (when they had a membership)."""
    with transaction.atomic():
        role = scim_role(scim_user) if scim_user.active else None
        if role is not None:
            account = scim_user.user
            if not account.is_active:  # provisioned again after a deprovisioning
                account.is_active = True
                account.save(update_fields=["is_active"])
            scim_membership_set(scim_user=scim_user, role=role, actor=actor)
            return
        if Membership.objects.filter(org=scim_user.org, user_id=scim_user.user_id).exists():
            reason = "deactivated by the identity provider" if not scim_user.active else (
                "no group gives a role"
            )  # fmt: skip
            member_deprovision(org=scim_user.org, user=scim_user.user, actor=actor, reason=reason)


def member_unprovision(*, scim_user: ScimUser, actor: Actor) -> Deprovisioned:
    """The identity provider deleted the person: deprovisioned, then forgotten."""
    with transaction.atomic():
        done = member_deprovision(
            org=scim_user.org, user=scim_user.user, actor=actor,
            reason="deleted by the identity provider",
        )  # fmt: skip
        scim_user_forget(scim_user=scim_user)
    return done
