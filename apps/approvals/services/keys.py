"""Approver keys: registration by an administrator (an upsert by key id, rotations
audited), enrollment by a member from their own browser (possession proven over a one-time
challenge, pending until confirmed), confirmation, labels, revocation, and the trust level
the mirror derives from them for a lifecycle link (server.md §1, §6)."""

from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from blake3 import blake3
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.approvals.errors import (
    ApproverKeyRefused,
)
from apps.approvals.models import (
    ApproverKey,
)
from apps.common.errors import InvalidInput, NotFound
from apps.receipts.models import MirrorEntry, TrustLevel
from apps.receipts.verifier import Verdict, verify_ed25519
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org

# heso.gated's insecure local decision key (seed [7u8; 32]): public, so anyone can sign
# with it. Never an approver key, never makes a lifecycle link L1 (server.md §6).
PLACEHOLDER_DECISION_KEY = "6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw="

# What a member's browser signs to prove it holds the key it enrolls: this domain, the
# server's one-time challenge, the raw public key and the org's slug (a proof made for one
# org or one challenge is worth nothing for another).
ENROLLMENT_DOMAIN = b"countersign-approver-enrollment/v1\x00"
ENROLLMENT_CHALLENGE_BYTES = 32


def canonical_public_key(text: str) -> str:
    """The key as stored and compared: decode, require 32 bytes, re-encode padded base64."""
    candidate = text.strip()
    candidate += "=" * (-len(candidate) % 4)
    try:
        raw = base64.b64decode(candidate, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("public_key: not base64") from None
    if len(raw) != 32:
        raise InvalidInput(f"public_key: an Ed25519 key is 32 bytes, got {len(raw)}")
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class Registered:
    key: ApproverKey
    change: str  # "registered", "unchanged" or "rotated"
    previous: ApproverKey | None = None


def approver_key_register(
    *,
    org: Org,
    public_key: str,
    key_id: str | None = None,
    label: str = "",
    member: AbstractBaseUser | None = None,
    actor: Actor = OPERATOR,
) -> Registered:
    """Register an approver key for ``org``, upserting by ``key_id`` (server.md §6).

    An administrative act (console manager, command, ``approvers:write``): the key is
    active at once, held by ``member`` when one is named.

    The same ``key_id`` with the same key changes nothing; with another key it is a
    rotation: the old key is revoked (its earlier votes stay counted and in the history)
    and the new one takes the id. Registrations and rotations go to the org's audit log.
    Refused (409): the public placeholder decision key, a key that signed the org's
    receipts as operator (nobody approves their own actions), a key registered under
    another id, or a revoked key (a retired key never comes back).
    """
    canonical = _acceptable_key(org, public_key)
    if not key_id:
        key_id = derived_key_id(canonical)
    try:
        with transaction.atomic():
            return _register_locked(
                org=org, canonical=canonical, key_id=key_id, label=label, member=member,
                actor=actor,
            )  # fmt: skip
    except IntegrityError:
        raise ApproverKeyRefused("this key or key id was registered concurrently") from None


def derived_key_id(canonical: str) -> str:
    return "ak_" + blake3(base64.b64decode(canonical)).hexdigest()[:16]


def _acceptable_key(org: Org, public_key: str) -> str:
    """The canonical key, unless it may never approve in ``org``."""
    canonical = canonical_public_key(public_key)
    if canonical == PLACEHOLDER_DECISION_KEY:
        raise ApproverKeyRefused(
            "this is heso's public placeholder decision key (HESO_ALLOW_INSECURE_LOCAL_"
            "DECISION_KEY): anyone can sign with it, so it can never approve"
        )
    if MirrorEntry.objects.filter(org=org, agent_identity=canonical).exists() or (
        MirrorEntry.objects.filter(org=org, operator_key=canonical).exists()
    ):
        raise ApproverKeyRefused(
            "this key signs the org's receipts as an operator; it cannot approve them"
        )
    return canonical


def _register_locked(
    *,
    org: Org,
    canonical: str,
    key_id: str,
    label: str,
    member: AbstractBaseUser | None,
    actor: Actor,
) -> Registered:
    current = (
        ApproverKey.objects.select_for_update()
        .filter(org=org, key_id=key_id, revoked_at__isnull=True)
        .first()
    )
    if current is not None and current.public_key == canonical:
        return Registered(key=current, change="unchanged")
    holder = ApproverKey.objects.filter(org=org, public_key=canonical).first()
    if holder is not None:
        state = "revoked" if holder.revoked_at else "registered"
        raise ApproverKeyRefused(f"this public key is already {state} as key id {holder.key_id!r}")
    now = timezone.now()
    if current is not None:
        current.revoked_at = now
        current.save(update_fields=["revoked_at"])
    key = ApproverKey.objects.create(
        org=org, key_id=key_id, public_key=canonical, label=label,
        member_id=member.pk if member is not None else None,
        created_by_id=actor.user_id, created_via=actor.via,
        confirmed_at=now, confirmed_by_id=actor.user_id,
    )  # fmt: skip
    change = "rotated" if current is not None else "registered"
    detail: dict[str, Any] = {"key_id": key_id, "public_key": canonical, "label": label}
    summary = f"approver key {key_id} {change}"
    if current is not None:
        detail["previous_public_key"] = current.public_key
        summary += f": {current.public_key[:10]}… revoked, {canonical[:10]}… active"
    kind = AuditKind.APPROVER_KEY_ROTATED if current else AuditKind.APPROVER_KEY_REGISTERED
    org_audit_record(org=org, kind=kind, summary=summary, detail=detail, actor=actor)
    return Registered(key=key, change=change, previous=current)


def approver_key_revoke(
    *,
    org: Org,
    key_id: str,
    actor: Actor = OPERATOR,
) -> ApproverKey:
    """Stop new votes by the key. Votes it already cast stay counted (and show it revoked)."""
    key = ApproverKey.objects.filter(org=org, key_id=key_id, revoked_at__isnull=True).first()
    if key is None:
        key = ApproverKey.objects.filter(org=org, key_id=key_id).order_by("-revoked_at").first()
    if key is None:
        raise NotFound(f"no approver key {key_id!r}")
    if key.revoked_at is None:
        with transaction.atomic():
            _revoke(key, actor=actor, why="revoked")
    return key


def _revoke(key: ApproverKey, *, actor: Actor, why: str) -> None:
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    org_audit_record(
        org=key.org_id, kind=AuditKind.APPROVER_KEY_REVOKED, actor=actor,
        summary=f"approver key {key.key_id} {why}",
        detail={"key_id": key.key_id, "public_key": key.public_key, "label": key.label,
                "member": _username(key.member_id)},
    )  # fmt: skip


def _username(user_id: int | None) -> str:
    if user_id is None:
        return ""
    user = get_user_model().objects.filter(pk=user_id).first()
    return str(user.get_username()) if user is not None else ""


# --- Enrollment by the member who holds the key ------------------------------------------


def enrollment_challenge_new() -> str:
    """A one-time challenge (base64) the member's browser signs to prove it holds the key;
    the caller keeps it where only that member's next request finds it (their session)."""
    return base64.b64encode(secrets.token_bytes(ENROLLMENT_CHALLENGE_BYTES)).decode("ascii")


def enrollment_message(*, org: Org, challenge: str, public_key: str) -> bytes:
    """The bytes the browser signs: domain || challenge || raw public key || org slug."""
    return (
        ENROLLMENT_DOMAIN
        + base64.b64decode(challenge)
        + base64.b64decode(public_key)
        + org.slug.encode("utf-8")
    )


def approver_key_enroll(
    *,
    org: Org,
    member: AbstractBaseUser,
    public_key: str,
    label: str,
    challenge: str | None,
    signature: str,
    single_sign_on: bool = False,
    replaces: ApproverKey | None = None,
    now: datetime | None = None,
) -> ApproverKey:
    """A member enrolls the key their browser holds, bound to them.

    ``challenge`` is the one the service issued to this member (None when none is
    outstanding, or it was used already); ``signature`` (base64) must verify over
    :func:`enrollment_message` under ``public_key``: only the holder of the private key can
    make it. The key is pending until an owner or manager confirms it, unless the org
    confirms the keys of members who signed in with single sign-on and ``single_sign_on``.
    ``replaces`` (one of the member's own keys, e.g. a lost device's) is revoked in the
    same transaction: a lost device must not keep approving while its replacement waits.
    """
    if not isinstance(label, str) or not label.strip():
        raise InvalidInput('label: name the device (e.g. "work laptop")')
    label = label.strip()
    if len(label) > 200:
        raise InvalidInput("label: at most 200 characters")
    if not challenge:
        raise ApproverKeyRefused(
            "no enrollment challenge is outstanding for you: reload the page and enroll again"
        )
    canonical = _acceptable_key(org, public_key)
    if not isinstance(signature, str) or verify_ed25519(
        canonical, signature, enrollment_message(org=org, challenge=challenge, public_key=canonical)
    ):
        raise ApproverKeyRefused(
            "the signature over the enrollment challenge does not verify under this key: "
            "the browser enrolling a key must hold it"
        )
    if replaces is not None and (replaces.org_id != org.pk or replaces.member_id != member.pk):
        raise NotFound("replaces: not one of your approver keys in this org")
    now = now or timezone.now()
    actor = Actor.console(member)
    confirmed = single_sign_on and org.confirm_sso_approver_keys
    try:
        with transaction.atomic():
            if ApproverKey.objects.filter(org=org, public_key=canonical).exists():
                raise ApproverKeyRefused("this key is already enrolled in this org")
            if replaces is not None and replaces.revoked_at is None:
                _revoke(replaces, actor=actor, why=f"revoked: replaced by a new device ({label})")
            key = ApproverKey.objects.create(
                org=org, key_id=derived_key_id(canonical), public_key=canonical, label=label,
                member_id=member.pk, created_by_id=member.pk, created_via="enrollment",
                confirmed_at=now if confirmed else None,
                confirmed_by_id=member.pk if confirmed else None,
            )  # fmt: skip
            state = "confirmed by single sign-on" if confirmed else "pending confirmation"
            detail: dict[str, Any] = {
                "key_id": key.key_id, "public_key": canonical, "label": label,
                "member": member.get_username(), "state": key.state.value,
            }  # fmt: skip
            if replaces is not None:
                detail["replaces"] = replaces.key_id
            org_audit_record(
                org=org, kind=AuditKind.APPROVER_KEY_ENROLLED, actor=actor, detail=detail,
                summary=f"approver key {key.key_id} ({label}) enrolled by "
                f"{member.get_username()}, {state}",
            )  # fmt: skip
    except IntegrityError:
        raise ApproverKeyRefused("this key was enrolled concurrently") from None
    return key


def approver_key_confirm(*, key: ApproverKey, actor: Actor) -> ApproverKey:
    """An owner or manager confirms a pending key: from now on its votes count (server.md
    §6 says which approvals it joins). Confirming an active key changes nothing; a revoked
    key is never confirmed."""
    with transaction.atomic():
        locked = ApproverKey.objects.select_for_update().get(pk=key.pk)
        if locked.revoked_at is not None:
            raise ApproverKeyRefused(f"approver key {locked.key_id} is revoked")
        if locked.confirmed_at is not None:
            return locked
        locked.confirmed_at = timezone.now()
        locked.confirmed_by_id = actor.user_id
        locked.save(update_fields=["confirmed_at", "confirmed_by"])
        org_audit_record(
            org=locked.org_id, kind=AuditKind.APPROVER_KEY_CONFIRMED, actor=actor,
            summary=f"approver key {locked.key_id} ({locked.label}) confirmed",
            detail={"key_id": locked.key_id, "public_key": locked.public_key,
                    "label": locked.label, "member": _username(locked.member_id)},
        )  # fmt: skip
    return locked


def approver_key_relabel(*, key: ApproverKey, label: str, actor: Actor) -> ApproverKey:
    """Rename the device a key is on (what rosters and votes call it)."""
    label = label.strip() if isinstance(label, str) else ""
    if not label or len(label) > 200:
        raise InvalidInput("label: 1 to 200 characters")
    if label == key.label:
        return key
    with transaction.atomic():
        previous, key.label = key.label, label
        key.save(update_fields=["label"])
        org_audit_record(
            org=key.org_id, kind=AuditKind.APPROVER_KEY_RELABELLED, actor=actor,
            summary=f"approver key {key.key_id} relabelled {label!r} (was {previous!r})",
            detail={"key_id": key.key_id, "label": label, "previous_label": previous},
        )  # fmt: skip
    return key


def approver_key_revoke_own(*, key: ApproverKey, member: AbstractBaseUser) -> ApproverKey:
    """A member revokes one of their own keys (a lost or retired device)."""
    if key.member_id != member.pk:
        raise NotFound("not one of your approver keys")
    if key.revoked_at is None:
        with transaction.atomic():
            _revoke(key, actor=Actor.console(member), why="revoked by its member")
    return key


def active_approver_key(*, org: Org, public_key: str) -> bool:
    """Whether ``public_key`` is an approver key registered and active for ``org``."""
    if public_key == PLACEHOLDER_DECISION_KEY:
        return False
    return ApproverKey.objects.active().filter(org=org, public_key=public_key).exists()


def mirror_trust_level(*, org: Org, verdict: Verdict) -> str:
    """The level the mirror stores and reports for a valid receipt (server.md §1).

    An action receipt keeps the level its signatures prove. A lifecycle link that needs
    decision authority is ``L1`` when its decision signer is an approver key registered
    and active for ``org`` now, ``L0`` otherwise (the placeholder key never counts)."""
    assert verdict.trust_level is not None
    signer = verdict.decision_signer
    if signer is not None and active_approver_key(org=org, public_key=signer):
        return TrustLevel.L1.value
    return verdict.trust_level
