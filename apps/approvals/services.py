"""Approvals: approver keys, open, vote, expire, relay legs (server.md §6, approvals.md §3, §8).

Token and co-signature verification (Ed25519, the slow part) runs before the transaction;
the transaction locks the approval row, re-reads its state, records the vote and applies
the transition, so concurrent votes are counted exactly once each.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from blake3 import blake3
from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.approvals.errors import (
    ApprovalContentMismatch,
    ApprovalExpired,
    ApprovalNotFound,
    ApprovalSettled,
    ApproverKeyRefused,
    AssemblyNotReady,
    DuplicateVote,
    LegRefused,
    RosterTooSmall,
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
    verify_approval_token,
    verify_leg,
)
from apps.common import metrics
from apps.common.errors import InvalidInput, NotFound
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier import content_bytes, content_hash
from apps.tenancy.models import Org

APPROVAL_ID_PREFIX = "apr_"


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


def approver_key_register(
    *,
    org: Org,
    public_key: str,
    key_id: str | None = None,
    label: str = "",
    created_by: User | None = None,
    via: str = "command",
) -> ApproverKey:
    """Register an approver key for ``org``.

    Refused: a key that signed the org's receipts as operator (nobody approves their own
    actions), and a key or key id already registered.
    """
    canonical = canonical_public_key(public_key)
    if MirrorEntry.objects.filter(org=org, agent_identity=canonical).exists():
        raise ApproverKeyRefused(
            "this key signs the org's receipts as an operator; it cannot approve them"
        )
    if not key_id:
        key_id = "ak_" + blake3(base64.b64decode(canonical)).hexdigest()[:16]
    if ApproverKey.objects.filter(org=org, public_key=canonical).exists():
        raise ApproverKeyRefused("this public key is already registered")
    if ApproverKey.objects.filter(org=org, key_id=key_id).exists():
        raise ApproverKeyRefused(f"key id {key_id!r} is already taken")
    try:
        with transaction.atomic():
            return ApproverKey.objects.create(
                org=org,
                key_id=key_id,
                public_key=canonical,
                label=label,
                created_by=created_by,
                created_via=via,
            )
    except IntegrityError:
        raise ApproverKeyRefused("this key or key id was registered concurrently") from None


def approver_key_revoke(*, org: Org, key_id: str) -> ApproverKey:
    """Stop new votes by the key. Votes it already cast stay counted (and show it revoked)."""
    key = ApproverKey.objects.filter(org=org, key_id=key_id).first()
    if key is None:
        raise NotFound(f"no approver key {key_id!r}")
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


# --- Opening --------------------------------------------------------------------------------


def _event(approval: Approval, kind: str, now: datetime, **detail: Any) -> None:
    ApprovalEvent.objects.create(
        org_id=approval.org_id, approval=approval, kind=kind, detail=detail, at=now
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


def _roster(org: Org, content: dict[str, Any] | None) -> list[str]:
    """Active keys of the org, narrowed to the suspension's signed approver list if any."""
    active = set(
        ApproverKey.objects.filter(org=org, revoked_at__isnull=True).values_list(
            "public_key", flat=True
        )
    )
    listed = _suspension_approval(content).get("approver_pubkeys")
    if isinstance(listed, list):
        active &= {key for key in listed if isinstance(key, str)}
    return sorted(active)


@dataclass(frozen=True)
class Opened:
    approval: Approval
    created: bool


def approval_open(
    *,
    org: Org,
    action_hash: str,
    threshold: int = 1,
    rule_id: str | None = None,
    workflow: str = "",
    account: str = "",
    suspended_content: dict[str, Any] | None = None,
    expires_at: datetime | None = None,
    access_token_digest: str = "",
    routing_hint: str = "",
    provisional: bool = False,
) -> Opened:
    """Open the pending approval of (org, ``action_hash``), or return the existing one.

    The roster is frozen now; a threshold above it is refused (422). The suspended content
    comes from the mirror when the receipt is there (else from the first vote).

    ``provisional`` marks an approval opened by a suspended push with defaults: the SDK
    pushes first and opens with its threshold right after, so the first explicit open of
    a provisional approval that nobody has voted on yet sets its threshold and rule.
    """
    existing = Approval.objects.filter(org=org, action_hash=action_hash).first()
    if existing is not None:
        if existing.provisional and not provisional:
            existing = _confirm_provisional(
                existing, threshold=threshold, rule_id=rule_id, workflow=workflow, account=account
            )
        return Opened(existing, False)
    if threshold < 1:
        raise InvalidInput("threshold: must be at least 1")
    content = suspended_content or mirrored_content(org=org, action_hash=action_hash)
    roster = _roster(org, content)
    if threshold > len(roster):
        raise RosterTooSmall(
            f"threshold {threshold} is larger than the roster of {len(roster)} active "
            "approver key(s)"
        )
    policy = (content or {}).get("policy")
    if rule_id is None:
        rule_id = policy.get("rule_id", "") if isinstance(policy, dict) else ""
    action = (content or {}).get("action")
    if isinstance(action, dict):
        workflow = workflow or str(action.get("workflow", ""))
        account = account or str(action.get("account", ""))
    timing = _suspension_approval(content)
    now = timezone.now()
    try:
        with transaction.atomic():
            approval = Approval.objects.create(
                org=org,
                approval_id=APPROVAL_ID_PREFIX + secrets.token_urlsafe(18),
                action_hash=action_hash,
                threshold=threshold,
                roster=roster,
                rule_id=rule_id or "",
                workflow=workflow[:200],
                account=account[:200],
                suspended_content=orjson.dumps(content).decode() if content else "",
                expires_at=expires_at or _parse_time(timing.get("expires_at")),
                on_timeout=str(timing.get("on_timeout", ""))[:16],
                access_token_digest=access_token_digest,
                routing_hint=routing_hint[:200],
                provisional=provisional,
            )
            _event(approval, "opened", now, threshold=threshold, roster=roster)
    except IntegrityError:
        # A concurrent open of the same action won; answer as a re-open.
        return Opened(Approval.objects.get(org=org, action_hash=action_hash), False)
    metrics.approval_transition(ApprovalStatus.PENDING)
    return Opened(approval, True)


def access_token_digest(token: str) -> str:
    """How the one-time approver-page token is stored: BLAKE3 hex, never the token."""
    return blake3(token.encode()).hexdigest()


@dataclass(frozen=True)
class OpenedWithToken:
    opened: Opened
    token: str | None  # the one-time approver-page token; only when the approval is new


def approval_open_with_access_token(
    *, org: Org, content: dict[str, Any], routing_hint: str = ""
) -> OpenedWithToken:
    """Team-path open: a verified, mirrored suspended receipt's approval, with a one-time
    token for the approver's page (shown once, stored as a digest) and an expiry from the
    receipt's signed ``suspension.approval.expires_at``, else ``APPROVAL_DEFAULT_TTL_SECONDS``.
    """
    expires_at = _parse_time(_suspension_approval(content).get("expires_at")) or (
        timezone.now() + timedelta(seconds=settings.APPROVAL_DEFAULT_TTL_SECONDS)
    )
    token = secrets.token_urlsafe(32)
    opened = approval_open(
        org=org,
        action_hash=content["action_hash"],
        suspended_content=content,
        expires_at=expires_at,
        access_token_digest=access_token_digest(token),
        routing_hint=routing_hint,
    )
    return OpenedWithToken(opened=opened, token=token if opened.created else None)


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


def _confirm_provisional(
    approval: Approval, *, threshold: int, rule_id: str | None, workflow: str, account: str
) -> Approval:
    """The first explicit open of a push-opened approval: adopt its threshold and rule."""
    with transaction.atomic():
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        if not locked.provisional:
            return locked
        if locked.status != ApprovalStatus.PENDING or locked.votes.exists():
            locked.provisional = False
            locked.save(update_fields=["provisional"])
            return locked
        if threshold < 1 or threshold > len(locked.roster):
            raise RosterTooSmall(
                f"threshold {threshold} is larger than the roster of {len(locked.roster)} "
                "active approver key(s)"
            )
        locked.threshold = threshold
        if rule_id is not None:
            locked.rule_id = rule_id
        locked.workflow = workflow[:200] or locked.workflow
        locked.account = account[:200] or locked.account
        locked.provisional = False
        locked.save(update_fields=["threshold", "rule_id", "workflow", "account", "provisional"])
        _event(locked, "confirmed", timezone.now(), threshold=threshold, rule_id=locked.rule_id)
    return locked


def approval_open_for_suspended(*, org: Org, action_hash: str) -> Approval | None:
    """After a suspended receipt was mirrored: open its approval (threshold 1, roster from
    the suspension's signed approver list), idempotently with ``POST /v1/approvals``, when
    the roster can meet it; otherwise open nothing (the push still succeeded)."""
    content = mirrored_content(org=org, action_hash=action_hash)
    if content is None or not is_suspended(content):
        return None
    try:
        return approval_open(
            org=org, action_hash=action_hash, suspended_content=content, provisional=True
        ).approval
    except RosterTooSmall:
        return None


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
    approval = Approval.objects.filter(org=org, action_hash=action_hash).first()
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


# --- Voting ---------------------------------------------------------------------------------


def _registered_keys(approval: Approval) -> dict[str, ApproverKey]:
    """The frozen roster's keys that are still active (revocation stops new votes)."""
    keys = ApproverKey.objects.filter(
        org_id=approval.org_id, public_key__in=approval.roster, revoked_at__isnull=True
    )
    return {key.public_key: key for key in keys}


def _past_expiry(approval: Approval, now: datetime) -> bool:
    """Expired without having been settled before its expiry."""
    if approval.expires_at is None or now <= approval.expires_at:
        return False
    return approval.resolved_at is None or approval.resolved_at >= approval.expires_at


def approval_vote(
    *,
    org: Org,
    action_hash: str,
    token: bytes,
    action_content: dict[str, Any],
    decision: str = "approved",
    record: str | None = None,
    co_sig_b64: str | None = None,
    now: datetime | None = None,
    refuse_after_expiry: bool = False,
) -> Approval:
    """Record one verified vote (approvals.md §3.1) and apply the transition (server.md §6).

    ``action_content`` is the decoded content; it must hash to ``action_hash`` (409).
    Token failures are 403; a second vote by a key, or a vote on a resolved approval, 409.
    ``refuse_after_expiry`` (team-path): past ``expires_at`` a vote is 410, whatever the
    timeout outcome, unless the approval was settled before it expired (then 409).
    """
    now = now or timezone.now()
    approval = Approval.objects.filter(org=org, action_hash=action_hash).first()
    if approval is None:
        raise ApprovalNotFound("no approval for this action_hash")
    if content_hash(action_content) != action_hash:
        raise ApprovalContentMismatch("action_content does not hash to the approval's action_hash")
    suspended: dict[str, Any] = (
        orjson.loads(approval.suspended_content) if approval.suspended_content else action_content
    )
    registered = _registered_keys(approval)
    nonce_hex = token[:32].hex()
    seen = {token[:32]} if ApprovalVote.objects.filter(nonce=nonce_hex).exists() else set()
    try:
        claims = verify_approval_token(
            token,
            action_canonical=content_bytes(suspended),
            now_unix_secs=int(now.timestamp()),
            seen_nonces=seen,
            required_scope=approval.rule_id,
            required_decision=decision,
            registered_pubkeys_b64=list(registered),
        )
    except ApprovalTokenError as error:
        raise TokenRejected(f"token rejected: {error.message}") from error
    if record is not None:
        try:
            verify_leg(
                suspended_content=suspended,
                threshold=approval.threshold,
                roster=approval.roster,
                registered_pubkeys_b64=list(registered),
                record_text=record,
                approver_pubkey_b64=claims.approver_public_key,
                co_sig_b64=co_sig_b64 or "",
            )
        except LegRejected as error:
            raise LegRefused(f"leg rejected: {error}") from error
    with transaction.atomic():
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        _expire_locked(locked, now)
        if refuse_after_expiry and _past_expiry(locked, now):
            raise ApprovalExpired(f"the approval expired at {locked.expires_at:%Y-%m-%dT%H:%M:%SZ}")
        if locked.status != ApprovalStatus.PENDING:
            raise ApprovalSettled(f"the approval is already {locked.status}")
        if ApprovalVote.objects.filter(
            approval=locked, approver_public_key=claims.approver_public_key
        ).exists():
            raise DuplicateVote("this approver key has already voted on this approval")
        try:
            with transaction.atomic():
                ApprovalVote.objects.create(
                    org=org,
                    approval=locked,
                    approver_key=registered[claims.approver_public_key],
                    approver_public_key=claims.approver_public_key,
                    decision=claims.decision,
                    nonce=nonce_hex,
                    record=record or "",
                    co_sig_b64=(co_sig_b64 or "") if record is not None else "",
                    voted_at=now,
                )
        except IntegrityError:
            raise TokenRejected("token rejected: approval token nonce has been replayed") from None
        if not locked.suspended_content:
            locked.suspended_content = orjson.dumps(suspended).decode()
        _event(locked, "vote", now, approver=claims.approver_public_key, decision=claims.decision)
        if claims.decision == "rejected":
            locked.status = ApprovalStatus.REJECTED
        else:
            locked.approved_count += 1
            if locked.approved_count >= locked.threshold:
                locked.status = ApprovalStatus.APPROVED
        if locked.status != ApprovalStatus.PENDING:
            locked.resolved_at = now
            _event(locked, "resolved", now, status=locked.status)
        locked.save(update_fields=["status", "approved_count", "resolved_at", "suspended_content"])
    if locked.status != ApprovalStatus.PENDING:
        metrics.approval_transition(locked.status)
    return locked


# --- Assembly relay ------------------------------------------------------------------------


def approval_assembly(*, org: Org, action_hash: str) -> dict[str, Any]:
    """The parts the SDK assembles the L1 receipt from (approvals.md §8); 409 until ready."""
    approval = approval_get(org=org, action_hash=action_hash)
    legs = [
        {"record": vote.record, "approver_pubkey_b64": vote.approver_public_key,
         "co_sig_b64": vote.co_sig_b64}
        for vote in approval.votes.filter(decision="approved").exclude(record="")
    ]  # fmt: skip
    if approval.status != ApprovalStatus.APPROVED or len(legs) < approval.threshold:
        raise AssemblyNotReady(
            f"not yet approved with enough legs: status {approval.status}, "
            f"{len(legs)} of {approval.threshold} leg(s)"
        )
    if approval.threshold == 1:
        legs = legs[:1]
    return {
        "legs": legs,
        "threshold": approval.threshold,
        "roster": approval.roster,
        "suspended_content": orjson.loads(approval.suspended_content),
    }
