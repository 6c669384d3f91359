"""Votes on co-signed policy changes: the one vote path of the SDK plane, the dashboard
plane and the console's signing page (server.md §6 where it applies).

A vote is an approval token (approvals.md §1-§3, verified by ``apps.approvals.tokens``
unchanged) with scope ``policy:deploy`` over the change's statement
(``apps.policy.statement``). Verification (Ed25519, the slow part) runs before the
transaction; the transaction locks the proposal row, re-reads its state, records the vote
and applies the transition, so concurrent votes are each counted exactly once and the
k-th approval activates the version exactly once, with its audit record and event.
"""

from __future__ import annotations

import base64
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.approvals.errors import DuplicateVote, RosterTooSmall, SelfApproval, TokenRejected
from apps.approvals.models import ApprovalVote, ApproverKey
from apps.approvals.services.keys import PLACEHOLDER_DECISION_KEY
from apps.approvals.tokens import (
    ApprovalTokenError,
    TokenClaims,
    token_decision,
    verify_approval_token,
)
from apps.policy.errors import PolicyProposalClosed
from apps.policy.models import (
    PolicyHead,
    PolicyProposal,
    PolicyProposalVote,
    ProposalStatus,
)
from apps.policy.selectors import policy_proposal_get, proposal_statement
from apps.policy.services import policy_activate_locked
from apps.policy.statement import POLICY_DEPLOY_SCOPE, statement_bytes
from apps.tenancy.audit_trail import Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org


def _active_keys(org_id: int, *, proposer_id: int | None = None) -> list[str]:
    """The org's active approver keys (confirmed, not revoked; never the public placeholder
    key), less those bound to the proposer: nobody approves their own change."""
    keys = ApproverKey.objects.active().filter(org_id=org_id)
    if proposer_id is not None:
        keys = keys.exclude(member_id=proposer_id)
    return sorted(
        key for key in keys.values_list("public_key", flat=True) if key != PLACEHOLDER_DECISION_KEY
    )


def _nonce_spent(nonce: bytes) -> bool:
    """Whether a token with this nonce was ever accepted, on a policy change or on an
    action's approval: a nonce is never reused."""
    nonce_hex = nonce.hex()
    return (
        PolicyProposalVote.objects.filter(nonce=nonce_hex).exists()
        or ApprovalVote.objects.filter(nonce=nonce_hex).exists()
    )


def _verify(proposal: PolicyProposal, token: bytes, now: datetime) -> TokenClaims:
    """The token's claims, or 403 with the reference's reason (approvals.md §3)."""
    try:
        return verify_approval_token(
            token,
            action_canonical=statement_bytes(proposal_statement(proposal)),
            now_unix_secs=int(now.timestamp()),
            seen_nonces={token[:32]} if _nonce_spent(token[:32]) else set(),
            required_scope=POLICY_DEPLOY_SCOPE,
            required_decision=token_decision(token) or "approved",
            registered_pubkeys_b64=_active_keys(
                proposal.org_id, proposer_id=proposal.proposed_by_id
            ),
        )
    except ApprovalTokenError as error:
        raise TokenRejected(f"token rejected: {error.message}") from error


def policy_proposal_vote(
    *,
    org: Org,
    policy_id: str,
    token: bytes,
    actor: Actor,
    now: datetime | None = None,
) -> PolicyProposal:
    """Record one approver's signed vote on the org's proposal of ``policy_id`` and apply
    the transition; return the proposal as it stands after it.

    Refused: a token that does not verify over the statement with scope ``policy:deploy``
    (an unregistered or revoked key, a bad signature, an expired token, a spent nonce, a
    wrong scope: 403); a vote submitted by the member who proposed the change (403: nobody
    approves their own change); a key not on the roster frozen at the first vote (403); a
    second vote by a key (409); a proposal that takes no more votes (409); a first vote
    while fewer active keys than the quorum exist (409). A rejection closes the proposal.
    """
    now = now or timezone.now()
    proposal = policy_proposal_get(org=org, policy_id=policy_id)
    claims = _verify(proposal, token, now)
    if actor.user_id is not None and actor.user_id == proposal.proposed_by_id:
        # Keys are not bound to members on this service yet, so the session is what shows
        # that the proposer is voting: their own dashboard plane or console page.
        raise SelfApproval(
            "token rejected: you proposed this change; nobody approves their own change"
        )
    with transaction.atomic():
        locked = PolicyProposal.objects.select_for_update().get(pk=proposal.pk)
        if not locked.takes_votes:
            raise PolicyProposalClosed(f"the proposal is {locked.status}: it takes no votes")
        if locked.votes.filter(approver_public_key=claims.approver_public_key).exists():
            raise DuplicateVote("this approver key has already voted on this proposal")
        roster = _freeze_roster(locked, now)
        if claims.approver_public_key not in roster:
            raise TokenRejected(
                "token rejected: the key is not on this proposal's roster (frozen at its "
                "first vote)"
            )
        _record_vote(locked, claims, token, actor, now)
        _apply(locked, actor, now)
        locked.save()
    return locked


def _freeze_roster(locked: PolicyProposal, now: datetime) -> list[str]:
    if locked.roster_frozen_at is not None:
        return list(locked.roster)
    roster = _active_keys(locked.org_id, proposer_id=locked.proposed_by_id)
    if len(roster) < locked.quorum:
        raise RosterTooSmall(
            f"the change needs {locked.quorum} approval(s) but only {len(roster)} approver "
            "key(s) are registered: register more approver keys first"
        )
    locked.roster = roster
    locked.roster_frozen_at = now
    return roster


def _record_vote(
    locked: PolicyProposal, claims: TokenClaims, token: bytes, actor: Actor, now: datetime
) -> None:
    key_id = (
        ApproverKey.objects.filter(
            org_id=locked.org_id, public_key=claims.approver_public_key, revoked_at__isnull=True
        )
        .values_list("key_id", flat=True)
        .first()
    )
    try:
        with transaction.atomic():
            PolicyProposalVote.objects.create(
                org_id=locked.org_id, proposal=locked,
                approver_public_key=claims.approver_public_key, approver_key_id=key_id or "",
                decision=claims.decision, nonce=claims.nonce.hex(),
                expiry=claims.expiry_unix_secs,
                token_b64=base64.b64encode(token).decode("ascii"),
                cast_by_id=actor.user_id, cast_via=actor.via, voted_at=now,
            )  # fmt: skip
    except IntegrityError:
        # The nonce taken meanwhile by a concurrent vote (the key's one vote is checked
        # under the lock): a replay.
        raise TokenRejected("token rejected: approval token nonce has been replayed") from None


def _apply(locked: PolicyProposal, actor: Actor, now: datetime) -> None:
    """The vote's consequence: a rejection closes it; the k-th approval activates an open
    proposal, or approves a break-glass activation after the fact."""
    policy_id = locked.version.policy_id
    votes = list(locked.votes.order_by("voted_at", "id"))
    last = votes[-1]
    if last.decision == "rejected":
        was = locked.status
        locked.status = ProposalStatus.REJECTED
        locked.resolved_at = now
        org_audit_record(
            org=locked.org_id, kind=AuditKind.POLICY_PROPOSAL_CLOSED, actor=actor,
            summary=f"policy {policy_id} rejected by approver key "
            f"{last.approver_key_id or last.approver_public_key}"
            + (" (it stays active: break-glass)" if was == ProposalStatus.BREAK_GLASS else ""),
            detail={"policy_id": policy_id, "status": "rejected",
                    "approver": last.approver_public_key},
        )  # fmt: skip
        return
    locked.approved_count += 1
    if locked.approved_count < locked.quorum:
        return
    approvers = [
        {"key_id": vote.approver_key_id, "public_key": vote.approver_public_key}
        for vote in votes
        if vote.decision == "approved"
    ]
    if locked.status == ProposalStatus.BREAK_GLASS:
        locked.status = ProposalStatus.ACTIVATED
        locked.ratified_at = now
        locked.resolved_at = now
        org_audit_record(
            org=locked.org_id, kind=AuditKind.POLICY_PROPOSAL_CLOSED, actor=actor,
            summary=f"break-glass activation of policy {policy_id} approved by the quorum",
            detail={"policy_id": policy_id, "status": "ratified", "approvers": approvers},
        )  # fmt: skip
        return
    _activate(locked, actor, approvers, now)


def _activate(
    locked: PolicyProposal, actor: Actor, approvers: list[dict[str, str]], now: datetime
) -> None:
    head = PolicyHead.objects.select_for_update().get(org_id=locked.org_id)
    if head.version_id != locked.previous_version_id:
        # Activations supersede open proposals, so this is a guard, not a path: the vote
        # stays recorded and the change is not activated over a pin it did not replace.
        locked.status = ProposalStatus.SUPERSEDED
        locked.resolved_at = now
        return
    proposer = Actor(via=locked.proposed_via, user=locked.proposed_by, name=locked.proposed_by_name)
    locked.deployment = policy_activate_locked(
        org=locked.org, head=head, version=locked.version, previous=locked.previous_version,
        actor=proposer, now=now, proposal=locked, approvers=approvers,
    )  # fmt: skip
    locked.status = ProposalStatus.ACTIVATED
    locked.resolved_at = now
