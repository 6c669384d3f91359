"""Approvals (server.md §6, approvals.md §3, §8): one module a concern, each service
named ``<entity>_<action>``; callers import from here.

- ``keys``: approver keys (register as an upsert by key id, rotate, revoke; a member's own
  enrollment from the browser, confirmation, labels) and the trust
  level the mirror derives from them for a lifecycle link;
- ``suspension``: an approval adopting its suspended content, and the approval a suspend
  ticket opened before any content;
- ``opening``: explicit and provisional opens;
- ``escalation``: reminders to the roster and the one escalation before the expiry;
- ``expiry``: applying the signed ``on_timeout`` outcome (the sweep, and the vote path);
- ``voting``: the one vote path (both profiles and the console), legs, assembly;
- ``history``: the approval's history rows;
- ``lifecycle``: a session's lifecycle links (decision, completion) answering the approval
  its suspension opened;
Reads (an approval, its eligible approvers and roster) are in ``apps.approvals.selectors``,
pure functions of suspended content in ``apps.approvals.content``.
- ``intake``: receipt intake, the SDK's push (verify, count a refusal, append, open the
  approval of a suspended receipt), single and batch, for both profiles.
"""

from apps.approvals.services.escalation import approval_escalation_set, approvals_escalate
from apps.approvals.services.expiry import approvals_sweep
from apps.approvals.services.intake import (
    RECEIPT_REFUSALS,
    IntakeOutcome,
    ReceiptRefusal,
    claimed_action_hash,
    receipt_intake,
    receipt_intake_batch,
    receipt_verify,
)
from apps.approvals.services.keys import (
    PLACEHOLDER_DECISION_KEY,
    Registered,
    active_approver_key,
    approver_key_confirm,
    approver_key_enroll,
    approver_key_register,
    approver_key_relabel,
    approver_key_revoke,
    approver_key_revoke_own,
    canonical_public_key,
    enrollment_challenge_new,
    enrollment_message,
    mirror_trust_level,
)
from apps.approvals.services.opening import (
    APPROVAL_ID_PREFIX,
    Opened,
    OpenedWithToken,
    access_token_digest,
    approval_open,
    approval_open_for_suspended,
    approval_open_with_access_token,
)
from apps.approvals.services.voting import (
    approval_assembly,
    approval_vote,
    approval_vote_with_token,
)

__all__ = [
    "APPROVAL_ID_PREFIX",
    "PLACEHOLDER_DECISION_KEY",
    "RECEIPT_REFUSALS",
    "IntakeOutcome",
    "Opened",
    "OpenedWithToken",
    "ReceiptRefusal",
    "Registered",
    "access_token_digest",
    "active_approver_key",
    "approval_assembly",
    "approval_escalation_set",
    "approval_open",
    "approval_open_for_suspended",
    "approval_open_with_access_token",
    "approval_vote",
    "approval_vote_with_token",
    "approvals_escalate",
    "approvals_sweep",
    "approver_key_confirm",
    "approver_key_enroll",
    "approver_key_register",
    "approver_key_relabel",
    "approver_key_revoke",
    "approver_key_revoke_own",
    "canonical_public_key",
    "claimed_action_hash",
    "enrollment_challenge_new",
    "enrollment_message",
    "mirror_trust_level",
    "receipt_intake",
    "receipt_intake_batch",
    "receipt_verify",
]
