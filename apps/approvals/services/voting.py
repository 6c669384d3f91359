"""The one vote path of both profiles and the console, legs attached later, and the
assembly relay (server.md §6, approvals.md §3, §8).

Token and co-signature verification (Ed25519, the slow part) runs before the transaction;
the transaction locks the approval row, re-reads its state, records the vote and applies
the transition, so concurrent votes are counted exactly once each.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.approvals.content import ticket_hash
from apps.approvals.errors import (
    ApprovalContentMismatch,
    ApprovalExpired,
    ApprovalNotFound,
    ApprovalSettled,
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
    ApprovalStatus,
    ApprovalVote,
    ApproverKey,
)
from apps.approvals.selectors import (
    approval_get,
    approval_resolve,
    approval_roster,
    counted_votes,
    eligible_approvers,
)
from apps.approvals.services.expiry import expire_locked
from apps.approvals.services.history import approval_event
from apps.approvals.services.suspension import adopt_content, producer_keys_of
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
from apps.common.errors import InvalidInput
from apps.common.timestamps import utc_text
from apps.receipts.verifier import content_bytes, content_hash
from apps.tenancy.models import Org


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
    if claims.approver_public_key in producer_keys_of(approval, content):
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
        previous = (
            counted_votes(locked).filter(approver_public_key=claims.approver_public_key).first()
        )
        if previous is not None:
            return _attach_leg(locked, previous, leg, claims, content, checked_roster=roster)
        if (locked.threshold, locked.rule_id) != (approval.threshold, approval.rule_id):
            # The first explicit open changed the terms (lane, scope) while this vote was
            # being verified: verify it again under the terms it will be counted under.
            claims = _verify_token(
                locked, token=token, content=content,
                decision=decision or token_decision(token) or "approved",
                eligible=eligible_approvers(locked, content=content),
                bringing_leg=record is not None, now=now,
            )  # fmt: skip
            roster = approval_roster(locked, content=content)
            if leg is not None:
                _check_leg(locked, content=content, roster=roster,
                           eligible=eligible_approvers(locked, content=content), record=leg[0],
                           co_sig_b64=leg[1], claims=claims)  # fmt: skip
        expire_locked(locked, now)
        if locked.expired_unsettled_at(now):
            raise ApprovalExpired(
                f"the approval expired at {utc_text(locked.expires_at, timespec='seconds')}"
            )
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
    approval_event(locked, "roster_frozen", now, roster=roster)
    return roster


def _record_vote(
    locked: Approval,
    claims: TokenClaims,
    content: dict[str, Any],
    leg: tuple[str, str] | None,
    reason: str,
    now: datetime,
    *,
    via_link: str = "",
) -> None:
    key = ApproverKey.objects.active().get(
        org_id=locked.org_id, public_key=claims.approver_public_key
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
        changed += adopt_content(locked, content)
    detail: dict[str, Any] = {"approver": claims.approver_public_key, "decision": claims.decision}
    if reason:
        detail["reason"] = reason[:2000]
    if via_link:
        detail["decision_link"] = via_link
    if claims.decision == "rejected":
        locked.status = ApprovalStatus.REJECTED
    else:
        locked.approved_count += 1
        if locked.approved_count >= locked.threshold:
            locked.status = ApprovalStatus.APPROVED
    # After the count moved, so the vote's outbound event carries the count it made.
    approval_event(locked, "vote", now, leg=leg is not None, **detail)
    if locked.status != ApprovalStatus.PENDING:
        locked.resolved_at = now
        approval_event(locked, "resolved", now, status=locked.status)
    locked.save(update_fields=sorted(set(changed)))


def approval_vote_by_link(
    locked: Approval, *, signer: str, decision: str, link_hash: str, now: datetime
) -> str | None:
    """Count a lifecycle decision link signed by a registered, active approver key (the
    mirror derived it ``L1``, server.md §1) as that approver's vote on the locked pending
    approval: the same eligibility, self-approval and once-per-key rules as a token. The
    link's action hash stands for the token's nonce (spent once). Returns why it cannot
    count, or None once counted."""
    content: dict[str, Any] = orjson.loads(locked.suspended_content)
    if locked.expired_unsettled_at(now):
        return "it arrived after the approval's signed expiry, when no vote counts any more"
    if signer in producer_keys_of(locked, content):
        return "its signer produced the suspended receipt: nobody approves their own action"
    if counted_votes(locked).filter(approver_public_key=signer).exists():
        return "its signer has already voted on this approval"
    if signer not in eligible_approvers(locked, content=content):
        return "its signer is not an eligible approver of this approval"
    try:
        with transaction.atomic():
            _freeze_roster(locked, content, now)
    except RosterTooSmall as error:
        return error.message
    claims = TokenClaims(
        nonce=bytes.fromhex(link_hash), expiry_unix_secs=0,
        decision="approved" if decision == "approved" else "rejected",
        scope=locked.rule_id, approver_public_key=signer,
    )  # fmt: skip
    try:
        with transaction.atomic():
            _record_vote(locked, claims, content, None, "", now, via_link=link_hash)
    except TokenRejected:
        return "the link was already counted"
    if locked.status != ApprovalStatus.PENDING:
        status = str(locked.status)
        transaction.on_commit(lambda: metrics.approval_transition(status))
    return None


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
    approval_event(locked, "leg_attached", timezone.now(), approver=claims.approver_public_key)
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


def approval_assembly(*, org: Org, action_hash: str) -> dict[str, Any]:
    """The parts the SDK assembles the L1 receipt from (approvals.md §8): once approved and
    every counted approving vote has its leg; 409 saying what is missing until then."""
    approval = approval_get(org=org, action_hash=action_hash)
    approving = list(counted_votes(approval).filter(decision="approved"))
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
