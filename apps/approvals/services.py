"""Approvals: approver keys, open, vote, expire, relay legs (server.md §6, approvals.md §3, §8).

Token and co-signature verification (Ed25519, the slow part) runs before the transaction;
the transaction locks the approval row, re-reads its state, records the vote and applies
the transition, so concurrent votes are counted exactly once each.

An approval is keyed by the suspended receipt's ``content.action_hash``. The SDK hands its
user another hash for the same suspension, the suspend ticket (``ticket_hash``); every
request addressed by a hash resolves either (``approval_resolve``).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from blake3 import blake3
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.approvals.errors import (
    AmbiguousTicket,
    ApprovalContentMismatch,
    ApprovalExpired,
    ApprovalNotFound,
    ApprovalSettled,
    ApproverKeyRefused,
    AssemblyNotReady,
    DuplicateVote,
    LegRefused,
    RosterTooSmall,
    SelfApproval,
    SuspendedReceiptNotPushed,
    TokenRejected,
)
from apps.approvals.models import (
    Approval,
    ApprovalEvent,
    ApprovalStatus,
    ApprovalVote,
    ApproverKey,
)
from apps.approvals.tokens import (
    ApprovalTokenError,
    LegRejected,
    TokenClaims,
    token_decision,
    token_public_key,
    verify_approval_token,
    verify_leg,
)
from apps.common import metrics
from apps.common.errors import InvalidInput, NotFound
from apps.receipts.models import MirrorEntry, TrustLevel
from apps.receipts.verifier import Verdict, content_bytes, content_hash
from apps.tenancy.models import ApiKey, Org, OrgAuditEvent

APPROVAL_ID_PREFIX = "apr_"

# heso.gated's insecure local decision key (seed [7u8; 32]): public, so anyone can sign
# with it. Never an approver key, never makes a lifecycle link L1 (server.md §6).
PLACEHOLDER_DECISION_KEY = "6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw="

# How much display context an opener may attach (never used to decide anything).
_CONTEXT_MAX_BYTES = 16 * 1024


# --- Approver keys ------------------------------------------------------------------------


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


def _audit(
    *,
    org: Org,
    kind: str,
    summary: str,
    detail: dict[str, Any],
    user: AbstractBaseUser | None,
    api_key: ApiKey | None,
    via: str,
) -> None:
    OrgAuditEvent.objects.create(
        org=org, kind=kind, summary=summary[:300], detail=detail,
        user_id=user.pk if user is not None else None, api_key=api_key, via=via,
    )  # fmt: skip


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
    created_by: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    via: str = "command",
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
                org=org, canonical=canonical, key_id=key_id, label=label,
                created_by=created_by, api_key=api_key, via=via,
            )  # fmt: skip
    except IntegrityError:
        raise ApproverKeyRefused("this key or key id was registered concurrently") from None


def _register_locked(
    *,
    org: Org,
    canonical: str,
    key_id: str,
    label: str,
    created_by: AbstractBaseUser | None,
    api_key: ApiKey | None,
    via: str,
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
        created_by_id=created_by.pk if created_by is not None else None, created_via=via,
    )  # fmt: skip
    change = "rotated" if current is not None else "registered"
    detail: dict[str, Any] = {"key_id": key_id, "public_key": canonical, "label": label}
    summary = f"approver key {key_id} {change}"
    if current is not None:
        detail["previous_public_key"] = current.public_key
        summary += f": {current.public_key[:10]}… revoked, {canonical[:10]}… active"
    _audit(
        org=org, kind=f"approver_key.{change}", summary=summary, detail=detail,
        user=created_by, api_key=api_key, via=via,
    )  # fmt: skip
    return Registered(key=key, change=change, previous=current)


def approver_key_revoke(
    *,
    org: Org,
    key_id: str,
    user: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    via: str = "command",
) -> ApproverKey:
    """Stop new votes by the key. Votes it already cast stay counted (and show it revoked)."""
    key = ApproverKey.objects.filter(org=org, key_id=key_id, revoked_at__isnull=True).first()
    if key is None:
        key = ApproverKey.objects.filter(org=org, key_id=key_id).order_by("-revoked_at").first()
    if key is None:
        raise NotFound(f"no approver key {key_id!r}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        _audit(
            org=org, kind="approver_key.revoked", summary=f"approver key {key_id} revoked",
            detail={"key_id": key_id, "public_key": key.public_key},
            user=user, api_key=api_key, via=via,
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


# --- Suspended content and tickets ---------------------------------------------------------


def ticket_hash(content: dict[str, Any]) -> str:
    """The suspend ticket the SDK hands its user for ``content`` (server.md §6): the content
    hash (receipts.md §4-§5) with ``agent_identity`` empty, as before the operator's key
    was stamped on it."""
    return content_hash({**content, "agent_identity": ""})


def is_suspended(content: dict[str, Any]) -> bool:
    """A lifecycle ``suspended`` receipt, or an L0 action the policy routed to a human
    (the body an L1 receipt later supersedes)."""
    if content.get("kind") == "suspended":
        return True
    policy = content.get("policy")
    return (
        content.get("kind", "action") == "action"
        and content.get("trust_level") == "L0"
        and isinstance(policy, dict)
        and policy.get("decision_path") == "require_approval"
    )


def mirrored_content(*, org: Org, action_hash: str) -> dict[str, Any] | None:
    """The content of the mirrored receipt with ``action_hash``, if any."""
    text = (
        MirrorEntry.objects.filter(org=org, action_hash=action_hash)
        .values_list("receipt", flat=True)
        .first()
    )
    if text is None:
        return None
    content: dict[str, Any] = orjson.loads(text)["content"]
    return content


def _suspension_approval(content: dict[str, Any] | None) -> dict[str, Any]:
    suspension = (content or {}).get("suspension")
    approval = suspension.get("approval") if isinstance(suspension, dict) else None
    return approval if isinstance(approval, dict) else {}


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _producer_keys(approval: Approval, content: dict[str, Any]) -> set[str]:
    """Keys that produced the suspended receipt: its ``agent_identity`` and the operator
    signatures of the mirrored receipt. None of them may approve it."""
    keys = {str(content.get("agent_identity", "")), *approval.producer_keys}
    keys.update(
        MirrorEntry.objects.filter(org_id=approval.org_id, action_hash=approval.action_hash)
        .exclude(operator_key="")
        .values_list("operator_key", flat=True)
    )
    keys.discard("")
    return keys


def _adopt_content(approval: Approval, content: dict[str, Any]) -> list[str]:
    """Give a content-less approval its suspended content (and so its ticket, its rule and
    its signed expiry, where the opener gave none); the fields changed."""
    approval.suspended_content = orjson.dumps(content).decode()
    approval.ticket_hash = ticket_hash(content)
    changed = ["suspended_content", "ticket_hash"]
    policy = content.get("policy")
    if not approval.rule_id and isinstance(policy, dict) and policy.get("rule_id"):
        approval.rule_id = str(policy["rule_id"])[:200]
        changed.append("rule_id")
    action = content.get("action")
    if isinstance(action, dict):
        if not approval.workflow and action.get("workflow"):
            approval.workflow = str(action["workflow"])[:200]
            changed.append("workflow")
        if not approval.account and action.get("account"):
            approval.account = str(action["account"])[:200]
            changed.append("account")
    timing = _suspension_approval(content)
    if approval.expires_at is None and _parse_time(timing.get("expires_at")):
        approval.expires_at = _parse_time(timing.get("expires_at"))
        changed.append("expires_at")
    if not approval.on_timeout and timing.get("on_timeout"):
        approval.on_timeout = str(timing["on_timeout"])[:16]
        changed.append("on_timeout")
    return changed


def approval_resolve(*, org: Org, ref: str) -> Approval | None:
    """The org's approval a request's hash names: by the suspended content's action_hash,
    else by its suspend ticket. A ticket shared by two suspended contents is refused."""
    direct = Approval.objects.filter(org=org, action_hash=ref).first()
    if direct is not None:
        return direct
    by_ticket = list(Approval.objects.filter(org=org, ticket_hash=ref).order_by("pk")[:3])
    if len(by_ticket) > 1:
        hashes = ", ".join(approval.action_hash for approval in by_ticket)
        raise AmbiguousTicket(
            f"the suspend ticket {ref} names more than one suspended receipt of this org "
            f"({hashes}): address the approval by the receipt's content.action_hash"
        )
    return by_ticket[0] if by_ticket else None


def _merge_ticket_opened(org: Org, content: dict[str, Any]) -> None:
    """When a suspended content arrives: an approval opened by its ticket before any content
    (heso-mcp opens and never pushes) becomes the content's approval, keeping its id. If
    the content's own approval exists too, the ticket-opened one (content-less, so never
    voted on) folds into it."""
    action_hash = content["action_hash"]
    ticket = ticket_hash(content)
    if ticket == action_hash:  # an empty agent_identity: the ticket is the content hash
        return
    orphan = (
        Approval.objects.select_for_update()
        .filter(org=org, action_hash=ticket, suspended_content="")
        .first()
    )
    if orphan is None:
        return
    now = timezone.now()
    keyed = Approval.objects.select_for_update().filter(org=org, action_hash=action_hash).first()
    if keyed is None:
        orphan.action_hash = action_hash
        changed = _adopt_content(orphan, content)
        orphan.save(update_fields=["action_hash", *changed])
        _event(orphan, "content_arrived", now, action_hash=action_hash, ticket=ticket)
        return
    _event(keyed, "merged", now, approval_id=orphan.approval_id, ticket=ticket)
    orphan.delete()


def _known_content(org: Org, action_hash: str, given: dict[str, Any] | None) -> dict[str, Any]:
    content = given or mirrored_content(org=org, action_hash=action_hash) or {}
    return content if content.get("action_hash") == action_hash else {}


# --- Opening --------------------------------------------------------------------------------


def _event(approval: Approval, kind: str, now: datetime, **detail: Any) -> None:
    ApprovalEvent.objects.create(
        org_id=approval.org_id, approval=approval, kind=kind, detail=detail, at=now
    )


@dataclass(frozen=True)
class Opened:
    approval: Approval
    created: bool  # the answer is 201: a new approval, or the first explicit open


def _display_context(matched_conditions: Any, scope: str) -> dict[str, Any]:
    context: dict[str, Any] = {}
    if matched_conditions:
        context["matched_conditions"] = matched_conditions
    if scope:
        context["scope"] = scope[:200]
    if len(orjson.dumps(context)) > _CONTEXT_MAX_BYTES:
        raise InvalidInput(f"matched_conditions: at most {_CONTEXT_MAX_BYTES} bytes of context")
    return context


def approval_open(
    *,
    org: Org,
    action_hash: str,
    threshold: int = 1,
    rule_id: str | None = None,
    workflow: str = "",
    account: str = "",
    matched_conditions: Any = None,
    scope: str = "",
    suspended_content: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
    access_token_digest: str = "",
    routing_hint: str = "",
    provisional: bool = False,
) -> Opened:
    """Open the pending approval of (org, ``action_hash``), or return the existing one.

    ``action_hash`` may be the suspend ticket. Opening never fails for want of approvers:
    the roster freezes at the first vote. ``rule_id`` ``""`` means absent (the suspended
    content's ``policy.rule_id`` applies). ``provisional`` marks an approval a suspended
    push opened with defaults; the first explicit open then sets its threshold and rule
    and answers as a creation (201), later opens as re-opens (200).
    """
    if threshold < 1:
        raise InvalidInput("threshold: must be at least 1")
    context = _display_context(matched_conditions, scope)
    content = _known_content(org, action_hash, suspended_content)
    with transaction.atomic():
        if content and is_suspended(content):
            _merge_ticket_opened(org, content)
        existing = approval_resolve(org=org, ref=action_hash)
        if existing is not None:
            return _reopen(
                existing, content=content, provisional=provisional, threshold=threshold,
                rule_id=rule_id or None, workflow=workflow, account=account, context=context,
            )  # fmt: skip
    return _create(
        org=org, action_hash=action_hash, content=content, threshold=threshold,
        rule_id=rule_id or None, workflow=workflow, account=account, context=context,
        expires_at=expires_at, access_token_digest=access_token_digest,
        routing_hint=routing_hint, provisional=provisional,
    )  # fmt: skip


def _create(
    *,
    org: Org,
    action_hash: str,
    content: dict[str, Any],
    threshold: int,
    rule_id: str | None,
    workflow: str,
    account: str,
    context: dict[str, Any],
    expires_at: datetime | None,
    access_token_digest: str,
    routing_hint: str,
    provisional: bool,
) -> Opened:
    approval = Approval(
        org=org,
        approval_id=APPROVAL_ID_PREFIX + secrets.token_urlsafe(18),
        action_hash=action_hash,
        threshold=threshold,
        rule_id=(rule_id or "")[:200],
        workflow=workflow[:200],
        account=account[:200],
        context=context,
        expires_at=expires_at,
        access_token_digest=access_token_digest,
        routing_hint=routing_hint[:200],
        provisional=provisional,
    )
    if content:
        _adopt_content(approval, content)
    now = timezone.now()
    try:
        with transaction.atomic():
            approval.save(force_insert=True)
            _event(approval, "opened", now, threshold=threshold, rule_id=approval.rule_id,
                   provisional=provisional, **context)  # fmt: skip
    except IntegrityError:
        # A concurrent open of the same action won; answer as a re-open.
        return Opened(Approval.objects.get(org=org, action_hash=action_hash), False)
    metrics.approval_transition(ApprovalStatus.PENDING)
    return Opened(approval, True)


def _reopen(
    existing: Approval,
    *,
    content: dict[str, Any],
    provisional: bool,
    threshold: int,
    rule_id: str | None,
    workflow: str,
    account: str,
    context: dict[str, Any],
) -> Opened:
    """An open of an approval that exists: fill in content it lacked; the first explicit
    open of a provisional one adopts the opener's threshold, rule and context."""
    locked = Approval.objects.select_for_update().get(pk=existing.pk)
    changed: list[str] = []
    if content and not locked.suspended_content and content["action_hash"] == locked.action_hash:
        changed += _adopt_content(locked, content)
    created = False
    if locked.provisional and not provisional:
        created = True
        locked.provisional = False
        changed.append("provisional")
        if locked.status == ApprovalStatus.PENDING and locked.roster_frozen_at is None:
            locked.threshold = threshold
            locked.rule_id = (rule_id or locked.rule_id)[:200]
            locked.workflow = workflow[:200] or locked.workflow
            locked.account = account[:200] or locked.account
            locked.context = {**locked.context, **context}
            changed += ["threshold", "rule_id", "workflow", "account", "context"]
        _event(locked, "confirmed", timezone.now(), threshold=locked.threshold,
               rule_id=locked.rule_id, **context)  # fmt: skip
    if changed:
        locked.save(update_fields=sorted(set(changed)))
    return Opened(locked, created)


def approval_open_for_suspended(
    *,
    org: Org,
    content: dict[str, Any],
    explicit: bool = False,
    routing_hint: str = "",
    access_token_digest: str = "",
    default_ttl: bool = False,
    operator_keys: Sequence[str] = (),
) -> Opened:
    """The approval of a verified, mirrored suspended receipt: opened (or found) by the
    key-scoped push (provisional: the SDK's own open follows and sets the threshold) and by
    team-path's ``POST /v1/approvals`` (explicit, with the approver-page token digest and,
    with ``default_ttl``, ``APPROVAL_DEFAULT_TTL_SECONDS`` where the receipt signs no
    expiry). An approval opened earlier by the ticket becomes this one."""
    expires_at = _parse_time(_suspension_approval(content).get("expires_at"))
    if expires_at is None and default_ttl:
        expires_at = timezone.now() + timedelta(seconds=settings.APPROVAL_DEFAULT_TTL_SECONDS)
    opened = approval_open(
        org=org,
        action_hash=content["action_hash"],
        suspended_content=content,
        expires_at=expires_at,
        access_token_digest=access_token_digest,
        routing_hint=routing_hint,
        provisional=not explicit,
    )
    approval = opened.approval
    missing = sorted(set(operator_keys) - set(approval.producer_keys))
    if missing and approval.action_hash == content["action_hash"]:
        approval.producer_keys = sorted({*approval.producer_keys, *missing})
        approval.save(update_fields=["producer_keys"])
    return opened


def access_token_digest(token: str) -> str:
    """How the one-time approver-page token is stored: BLAKE3 hex, never the token."""
    return blake3(token.encode()).hexdigest()


@dataclass(frozen=True)
class OpenedWithToken:
    opened: Opened
    token: str | None  # the one-time approver-page token; only when the approval is new


def approval_open_with_access_token(
    *, org: Org, content: dict[str, Any], routing_hint: str = "", operator_keys: Sequence[str] = ()
) -> OpenedWithToken:
    """Team-path open: a verified, mirrored suspended receipt's approval, with a one-time
    token for the approver's page (shown once, stored as a digest) and an expiry from the
    receipt's signed ``suspension.approval.expires_at``, else ``APPROVAL_DEFAULT_TTL_SECONDS``.
    """
    token = secrets.token_urlsafe(32)
    opened = approval_open_for_suspended(
        org=org, content=content, explicit=True, routing_hint=routing_hint,
        access_token_digest=access_token_digest(token), default_ttl=True,
        operator_keys=operator_keys,
    )  # fmt: skip
    return OpenedWithToken(opened=opened, token=token if opened.created else None)


# --- Reading and expiry -----------------------------------------------------------------------


def _expire_locked(approval: Approval, now: datetime) -> bool:
    """Apply the on_timeout outcome to a locked pending approval past its expiry."""
    if approval.status != ApprovalStatus.PENDING or approval.expires_at is None:
        return False
    if now <= approval.expires_at:
        return False
    if approval.on_timeout == "deny":
        approval.status = ApprovalStatus.REJECTED
        approval.resolved_at = now
        _event(approval, "expired", now, outcome="rejected")
        metrics.approval_transition(ApprovalStatus.REJECTED)
    elif approval.on_timeout in ("escalate", "auto_approve"):
        # Nobody signed, so the service never approves on its own: it stays pending.
        flag = "escalated" if approval.on_timeout == "escalate" else "auto_approve_refused"
        if approval.flag == flag:
            return False
        approval.flag = flag
        _event(approval, "flagged", now, flag=flag)
    else:
        approval.status = ApprovalStatus.EXPIRED
        approval.resolved_at = now
        _event(approval, "expired", now, outcome="expired")
        metrics.approval_transition(ApprovalStatus.EXPIRED)
    approval.save(update_fields=["status", "resolved_at", "flag"])
    return True


def approval_refresh(approval: Approval, *, now: datetime | None = None) -> Approval:
    """The approval with its expiry applied (the write happens only when it changes)."""
    now = now or timezone.now()
    if approval.status != ApprovalStatus.PENDING or approval.expires_at is None:
        return approval
    if now <= approval.expires_at:
        return approval
    with transaction.atomic():
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        _expire_locked(locked, now)
    return locked


def approval_get_by_id(*, org: Org, approval_id: str) -> Approval:
    """The org's approval with ``approval_id``, its expiry applied; another org's is 404."""
    approval = Approval.objects.filter(org=org, approval_id=approval_id).first()
    if approval is None:
        raise ApprovalNotFound(f"no approval {approval_id!r} for this team")
    return approval_refresh(approval)


def approval_get(*, org: Org, action_hash: str) -> Approval:
    """The approval ``action_hash`` names (the content hash or the suspend ticket)."""
    approval = approval_resolve(org=org, ref=action_hash)
    if approval is None:
        raise ApprovalNotFound("no approval for this action_hash")
    return approval_refresh(approval)


def approvals_sweep(*, now: datetime | None = None) -> int:
    """Apply every overdue pending approval's on_timeout outcome; the number changed."""
    now = now or timezone.now()
    changed = 0
    overdue = Approval.objects.filter(
        status=ApprovalStatus.PENDING, expires_at__lt=now
    ).values_list("pk", flat=True)
    for pk in list(overdue):
        with transaction.atomic():
            locked = Approval.objects.select_for_update().get(pk=pk)
            changed += _expire_locked(locked, now)
    return changed


def eligible_approvers(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """Who may vote now: the frozen roster's keys still active once the first vote froze
    it; before that, the org's active keys narrowed to the suspension's signed
    ``approver_pubkeys`` when that list is non-empty (an empty list narrows nothing)."""
    active = set(
        ApproverKey.objects.filter(org_id=approval.org_id, revoked_at__isnull=True).values_list(
            "public_key", flat=True
        )
    )
    if approval.roster_frozen_at is not None:
        return sorted(active & set(approval.roster))
    if content is None and approval.suspended_content:
        content = orjson.loads(approval.suspended_content)
    listed = _suspension_approval(content).get("approver_pubkeys")
    if isinstance(listed, list) and listed:
        active &= {key for key in listed if isinstance(key, str)}
    return sorted(active)


def approval_roster(approval: Approval, *, content: dict[str, Any] | None = None) -> list[str]:
    """The roster a quorum leg signs over: frozen, or the one the next vote would freeze."""
    if approval.roster_frozen_at is not None:
        return list(approval.roster)
    return eligible_approvers(approval, content=content)


# --- Voting ---------------------------------------------------------------------------------


def _past_expiry(approval: Approval, now: datetime) -> bool:
    """Expired without having been settled before its expiry."""
    if approval.expires_at is None or now <= approval.expires_at:
        return False
    return approval.resolved_at is None or approval.resolved_at >= approval.expires_at


def _vote_content(approval: Approval, action_content: dict[str, Any] | None) -> dict[str, Any]:
    """The suspended content a vote is verified against (approvals.md §2): the stored one,
    or, for an approval that has none yet, the vote's own when it hashes to the approval."""
    if action_content is not None and content_hash(action_content) != approval.action_hash:
        if ticket_hash(action_content) == approval.action_hash and not approval.suspended_content:
            raise SuspendedReceiptNotPushed(
                "this approval was opened by the suspend ticket and its suspended receipt has "
                "not been pushed yet: push the receipt, then vote"
            )
        raise ApprovalContentMismatch("action_content does not hash to the approval's action_hash")
    if approval.suspended_content:
        stored: dict[str, Any] = orjson.loads(approval.suspended_content)
        return stored
    if action_content is None:
        raise SuspendedReceiptNotPushed(
            "the approval holds no suspended content yet: push the suspended receipt first"
        )
    return action_content


def _verify_token(
    approval: Approval,
    *,
    token: bytes,
    content: dict[str, Any],
    decision: str,
    eligible: list[str],
    bringing_leg: bool,
    now: datetime,
) -> TokenClaims:
    """The token's claims (403 on any failure, or when its key produced the receipt). The
    same token again from the key whose vote it is passes the nonce check only when it
    brings that vote's leg (decided under the lock); otherwise it is a replay."""
    nonce_hex = token[:32].hex()
    used_by = (
        ApprovalVote.objects.filter(nonce=nonce_hex)
        .values_list("approval_id", "approver_public_key")
        .first()
    )
    own_vote = used_by == (approval.pk, token_public_key(token))
    replayed = used_by is not None and not (own_vote and bringing_leg)
    try:
        claims = verify_approval_token(
            token,
            action_canonical=content_bytes(content),
            now_unix_secs=int(now.timestamp()),
            seen_nonces={token[:32]} if replayed else set(),
            required_scope=approval.rule_id or _content_rule(content),
            required_decision=decision,
            registered_pubkeys_b64=eligible,
        )
    except ApprovalTokenError as error:
        raise TokenRejected(f"token rejected: {error.message}") from error
    if claims.approver_public_key in _producer_keys(approval, content):
        raise SelfApproval(
            "token rejected: the approver key produced this receipt; nobody approves their "
            "own action"
        )
    return claims


def _content_rule(content: dict[str, Any]) -> str:
    """The rule a suspended content's policy names: the approval's rule when its opener
    gave none (server.md §6: ``rule_id`` ``""`` means absent)."""
    policy = content.get("policy")
    return str(policy.get("rule_id", "")) if isinstance(policy, dict) else ""


def _check_leg(
    approval: Approval,
    *,
    content: dict[str, Any],
    roster: list[str],
    eligible: list[str],
    record: str,
    co_sig_b64: str,
    claims: TokenClaims,
) -> None:
    try:
        verify_leg(
            suspended_content=content,
            threshold=approval.threshold,
            roster=roster,
            registered_pubkeys_b64=eligible,
            record_text=record,
            approver_pubkey_b64=claims.approver_public_key,
            co_sig_b64=co_sig_b64,
        )
    except LegRejected as error:
        raise LegRefused(f"leg rejected: {error}") from error


def approval_vote_with_token(
    *,
    approval: Approval,
    token: bytes,
    action_content: dict[str, Any] | None = None,
    decision: str | None = None,
    record: str | None = None,
    co_sig_b64: str | None = None,
    reason: str = "",
    now: datetime | None = None,
) -> Approval:
    """Record one approver's signed vote (approvals.md §3.1) and apply the transition
    (server.md §6): the one vote path of both profiles and the console.

    The decision is the token's own (``decision``, when the caller declares one, must match
    it: 403). ``action_content``, when given, must hash to the approval's action (409).
    Refused: a producer key of the suspended receipt (403); a second vote by a key (409);
    a vote on a resolved approval (409); any vote after the signed expiry (409, team-path
    410); a first vote while fewer keys than the threshold are eligible (409). A vote
    without its leg counts; the same key may attach the leg later (same decision, with
    ``record`` and ``co_sig_b64``), which changes nothing else.
    """
    now = now or timezone.now()
    if (record is None) != (co_sig_b64 is None):
        raise InvalidInput("record and co_sig_b64 go together")
    if decision is not None and decision not in ("approved", "rejected"):
        raise InvalidInput("decision: must be approved or rejected")
    content = _vote_content(approval, action_content)
    eligible = eligible_approvers(approval, content=content)
    roster = approval_roster(approval, content=content)
    claims = _verify_token(
        approval, token=token, content=content,
        decision=decision or token_decision(token) or "approved", eligible=eligible,
        bringing_leg=record is not None, now=now,
    )  # fmt: skip
    leg = None
    if record is not None:
        leg = (record, co_sig_b64 or "")
        _check_leg(approval, content=content, roster=roster, eligible=eligible, record=record,
                   co_sig_b64=leg[1], claims=claims)  # fmt: skip
    with transaction.atomic():
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        previous = locked.votes.filter(approver_public_key=claims.approver_public_key).first()
        if previous is not None:
            return _attach_leg(locked, previous, leg, claims, content, checked_roster=roster)
        _expire_locked(locked, now)
        if _past_expiry(locked, now):
            raise ApprovalExpired(f"the approval expired at {locked.expires_at:%Y-%m-%dT%H:%M:%SZ}")
        if locked.status != ApprovalStatus.PENDING:
            raise ApprovalSettled(f"the approval is already {locked.status}")
        frozen = _freeze_roster(locked, content, now)
        if claims.approver_public_key not in eligible_approvers(locked, content=content):
            raise TokenRejected("token rejected: the key is not an eligible approver here")
        if leg is not None and frozen != roster:
            _check_leg(locked, content=content, roster=frozen, eligible=frozen, record=leg[0],
                       co_sig_b64=leg[1], claims=claims)  # fmt: skip
        _record_vote(locked, claims, content, leg, reason, now)
    if locked.status != ApprovalStatus.PENDING:
        metrics.approval_transition(locked.status)
    return locked


def _freeze_roster(locked: Approval, content: dict[str, Any], now: datetime) -> list[str]:
    """The roster of a locked pending approval, frozen now if this is its first vote."""
    if locked.roster_frozen_at is not None:
        return list(locked.roster)
    roster = eligible_approvers(locked, content=content)
    if len(roster) < locked.threshold:
        raise RosterTooSmall(
            f"the approval needs {locked.threshold} approver(s) but only {len(roster)} "
            "approver key(s) are eligible: register more approver keys first"
        )
    locked.roster = roster
    locked.roster_frozen_at = now
    _event(locked, "roster_frozen", now, roster=roster)
    return roster


def _record_vote(
    locked: Approval,
    claims: TokenClaims,
    content: dict[str, Any],
    leg: tuple[str, str] | None,
    reason: str,
    now: datetime,
) -> None:
    key = ApproverKey.objects.get(
        org_id=locked.org_id, public_key=claims.approver_public_key, revoked_at__isnull=True
    )
    try:
        with transaction.atomic():
            ApprovalVote.objects.create(
                org_id=locked.org_id,
                approval=locked,
                approver_key=key,
                approver_public_key=claims.approver_public_key,
                decision=claims.decision,
                nonce=claims.nonce.hex(),
                record=leg[0] if leg else "",
                co_sig_b64=leg[1] if leg else "",
                reason=reason[:2000],
                voted_at=now,
            )
    except IntegrityError:
        raise TokenRejected("token rejected: approval token nonce has been replayed") from None
    changed = ["status", "approved_count", "resolved_at", "roster", "roster_frozen_at"]
    if not locked.suspended_content:
        changed += _adopt_content(locked, content)
    detail: dict[str, Any] = {"approver": claims.approver_public_key, "decision": claims.decision}
    if reason:
        detail["reason"] = reason[:2000]
    _event(locked, "vote", now, leg=leg is not None, **detail)
    if claims.decision == "rejected":
        locked.status = ApprovalStatus.REJECTED
    else:
        locked.approved_count += 1
        if locked.approved_count >= locked.threshold:
            locked.status = ApprovalStatus.APPROVED
    if locked.status != ApprovalStatus.PENDING:
        locked.resolved_at = now
        _event(locked, "resolved", now, status=locked.status)
    locked.save(update_fields=sorted(set(changed)))


def _attach_leg(
    locked: Approval,
    vote: ApprovalVote,
    leg: tuple[str, str] | None,
    claims: TokenClaims,
    content: dict[str, Any],
    *,
    checked_roster: list[str],
) -> Approval:
    """A second submission by a key that already voted: attach its missing leg (same
    decision; the vote and the approval's state are unchanged), or refuse it as a
    duplicate vote."""
    if leg is None or vote.record or claims.decision != vote.decision:
        raise DuplicateVote("this approver key has already voted on this approval")
    if vote.decision != "approved":
        raise DuplicateVote("a rejection has no leg to attach")
    if list(locked.roster) != checked_roster:
        roster = list(locked.roster)
        _check_leg(locked, content=content, roster=roster, eligible=roster, record=leg[0],
                   co_sig_b64=leg[1], claims=claims)  # fmt: skip
    vote.record, vote.co_sig_b64 = leg
    vote.save(update_fields=["record", "co_sig_b64"])
    _event(locked, "leg_attached", timezone.now(), approver=claims.approver_public_key)
    return locked


def approval_vote(
    *,
    org: Org,
    action_hash: str,
    token: bytes,
    action_content: dict[str, Any] | None = None,
    decision: str | None = None,
    record: str | None = None,
    co_sig_b64: str | None = None,
    reason: str = "",
    now: datetime | None = None,
) -> Approval:
    """A vote addressed by hash (the content's action_hash or the suspend ticket)."""
    approval = approval_resolve(org=org, ref=action_hash)
    if approval is None:
        raise ApprovalNotFound("no approval for this action_hash")
    return approval_vote_with_token(
        approval=approval, token=token, action_content=action_content, decision=decision,
        record=record, co_sig_b64=co_sig_b64, reason=reason, now=now,
    )  # fmt: skip


# --- Assembly relay ------------------------------------------------------------------------


def approval_assembly(*, org: Org, action_hash: str) -> dict[str, Any]:
    """The parts the SDK assembles the L1 receipt from (approvals.md §8): once approved and
    every counted approving vote has its leg; 409 saying what is missing until then."""
    approval = approval_get(org=org, action_hash=action_hash)
    approving = list(approval.votes.filter(decision="approved"))
    legs = [
        {"record": vote.record, "approver_pubkey_b64": vote.approver_public_key,
         "co_sig_b64": vote.co_sig_b64}
        for vote in approving if vote.record
    ]  # fmt: skip
    if approval.status != ApprovalStatus.APPROVED:
        raise AssemblyNotReady(
            f"not yet approved: status {approval.status}, {approval.approved_count} of "
            f"{approval.threshold} approval(s)"
        )
    missing = len(approving) - len(legs)
    if missing:
        raise AssemblyNotReady(
            f"approved, but {missing} of {len(approving)} approving vote(s) still miss their "
            "co-signed leg: each such approver submits its token again with record and "
            "co_sig_b64"
        )
    if approval.threshold == 1:
        legs = legs[:1]
    return {
        "legs": legs,
        "threshold": approval.threshold,
        "roster": approval.roster,
        "suspended_content": orjson.loads(approval.suspended_content),
    }
