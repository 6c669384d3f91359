"""Opening an approval: explicitly (the SDK, team-path) or provisionally by a suspended
push; never refused for want of approver keys (server.md §6)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from blake3 import blake3
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.approvals.content import is_suspended, parse_signed_time, signed_approval_block
from apps.approvals.models import (
    Approval,
    ApprovalStatus,
)
from apps.approvals.selectors import approval_resolve
from apps.approvals.services.history import approval_event
from apps.approvals.services.lifecycle import approval_answer_mirrored_links
from apps.approvals.services.suspension import adopt_content, known_content, merge_ticket_opened
from apps.common import metrics
from apps.common.errors import InvalidInput
from apps.common.stored_json import stored_text
from apps.tenancy.models import Org

APPROVAL_ID_PREFIX = "apr_"

# How much display context an opener may attach (never used to decide anything).
_CONTEXT_MAX_BYTES = 16 * 1024


@dataclass(frozen=True)
class Opened:
    approval: Approval
    created: bool  # the answer is 201: a new approval, or the first explicit open
    inserted: bool = False  # a new approval row (not the first explicit open of one)


def _display_context(matched_conditions: Any, scope: str) -> dict[str, Any]:
    context: dict[str, Any] = {}
    if matched_conditions:
        context["matched_conditions"] = matched_conditions
    if scope:
        context["scope"] = scope[:200]
    if len(stored_text(context).encode()) > _CONTEXT_MAX_BYTES:
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
    content = known_content(org, action_hash, suspended_content)
    with transaction.atomic():
        if content and is_suspended(content):
            merge_ticket_opened(org, content)
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
        adopt_content(approval, content)
    now = timezone.now()
    try:
        with transaction.atomic():
            approval.save(force_insert=True)
            approval_event(approval, "opened", now, threshold=threshold, rule_id=approval.rule_id,
                   provisional=provisional, **context)  # fmt: skip
    except IntegrityError:
        # A concurrent open of the same action won; answer as a re-open.
        return Opened(Approval.objects.get(org=org, action_hash=action_hash), False)
    metrics.approval_transition(ApprovalStatus.PENDING)
    return Opened(approval, True, inserted=True)


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
        changed += adopt_content(locked, content)
    created = False
    if locked.provisional and not provisional:
        created = True
        locked.provisional = False
        changed.append("provisional")
        rule = (rule_id or locked.rule_id)[:200]
        if (threshold, rule) != (locked.threshold, locked.rule_id):
            changed += _set_aside_approving_votes(locked, threshold=threshold, rule_id=rule)
        if locked.status == ApprovalStatus.PENDING and locked.roster_frozen_at is None:
            locked.threshold = threshold
            locked.rule_id = rule
            locked.workflow = workflow[:200] or locked.workflow
            locked.account = account[:200] or locked.account
            locked.context = {**locked.context, **context}
            changed += ["threshold", "rule_id", "workflow", "account", "context"]
        approval_event(locked, "confirmed", timezone.now(), threshold=locked.threshold,
               rule_id=locked.rule_id, **context)  # fmt: skip
    if changed:
        locked.save(update_fields=sorted(set(changed)))
    return Opened(locked, created)


def _set_aside_approving_votes(locked: Approval, *, threshold: int, rule_id: str) -> list[str]:
    """The first explicit open of a provisional approval asks for other terms than the
    provisional ones (threshold 1, the content's rule): the approving votes cast before it
    were verified for another lane (a single approver's leg signs the approvals.md §5
    payload, a quorum leg §6 over the threshold and roster) or another scope, so none of
    them counts any more. Each is kept, marked set aside with the reason, in the history
    too; the count starts again under the opener's terms (the same approvers may vote
    again, with a new token), and a provisional ``approved`` returns to ``pending``. A
    verified rejection stands: one rejection settles any lane and never undercuts a
    threshold. The fields changed."""
    if locked.status not in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED):
        return []
    votes = list(locked.votes.filter(set_aside_at__isnull=True, decision="approved"))
    if not votes:
        return []
    now = timezone.now()
    reason = (
        f"cast before the explicit open, under threshold {locked.threshold} and rule "
        f"{locked.rule_id!r}; the opener set threshold {threshold} and rule {rule_id!r}, "
        "so the vote must be cast again under those terms"
    )
    for vote in votes:
        vote.set_aside_at, vote.set_aside_reason = now, reason
        vote.save(update_fields=["set_aside_at", "set_aside_reason"])
        approval_event(locked, "vote_set_aside", now, approver=vote.approver_public_key,
                       decision=vote.decision, reason=reason)  # fmt: skip
    # No counted vote is left, so no roster was signed over: it freezes again at the next.
    locked.approved_count = 0
    locked.roster, locked.roster_frozen_at = [], None
    if locked.status == ApprovalStatus.APPROVED:
        locked.status, locked.resolved_at = ApprovalStatus.PENDING, None
        approval_event(locked, "reopened", now, threshold=threshold, rule_id=rule_id)
        metrics.approval_transition(ApprovalStatus.PENDING)
    return ["approved_count", "roster", "roster_frozen_at", "status", "resolved_at"]


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
    expires_at = parse_signed_time(signed_approval_block(content).get("expires_at"))
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
    if opened.inserted:
        # A client that flushed its session's links before opening: they answer it now.
        approval_answer_mirrored_links(org=org, approval=approval)
        approval.refresh_from_db()
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
