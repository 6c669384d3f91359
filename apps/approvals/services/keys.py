"""Approver keys: registration (an upsert by key id, rotations audited), revocation, and
the trust level the mirror derives from them for a lifecycle link (server.md §1, §6)."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from blake3 import blake3
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
from apps.receipts.verifier import Verdict
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org

# heso.gated's insecure local decision key (seed [7u8; 32]): public, so anyone can sign
# with it. Never an approver key, never makes a lifecycle link L1 (server.md §6).
PLACEHOLDER_DECISION_KEY = "6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw="

# How much display context an opener may attach (never used to decide anything).


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
    actor: Actor = OPERATOR,
) -> Registered:
    """Register an approver key for ``org``, upserting by ``key_id`` (server.md §6).

    The same ``key_id`` with the same key changes nothing; with another key it is a
    rotation: the old key is revoked (its earlier votes stay counted and in the history)
    and the new one takes the id. Registrations and rotations go to the org's audit log.
    Refused (409): the public placeholder decision key, a key that signed the org's
    receipts as operator (nobody approves their own actions), a key registered under
    another id, or a revoked key (a retired key never comes back).
    """
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
    if not key_id:
        key_id = "ak_" + blake3(base64.b64decode(canonical)).hexdigest()[:16]
    try:
        with transaction.atomic():
            return _register_locked(
                org=org, canonical=canonical, key_id=key_id, label=label, actor=actor
            )  # fmt: skip
    except IntegrityError:
        raise ApproverKeyRefused("this key or key id was registered concurrently") from None


def _register_locked(
    *,
    org: Org,
    canonical: str,
    key_id: str,
    label: str,
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
        created_by_id=actor.user_id, created_via=actor.via,
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
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
            org_audit_record(
                org=org, kind=AuditKind.APPROVER_KEY_REVOKED, actor=actor,
                summary=f"approver key {key_id} revoked",
                detail={"key_id": key_id, "public_key": key.public_key},
            )  # fmt: skip
    return key


def active_approver_key(*, org: Org, public_key: str) -> bool:
    """Whether ``public_key`` is an approver key registered and active for ``org``."""
    if public_key == PLACEHOLDER_DECISION_KEY:
        return False
    return ApproverKey.objects.filter(
        org=org, public_key=public_key, revoked_at__isnull=True
    ).exists()


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
