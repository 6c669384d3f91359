"""Approvals (server.md §6, approvals.md §3, §8): one module a concern, each service
named ``<entity>_<action>``; callers import from here.

- ``keys``: approver keys (register as an upsert by key id, rotate, revoke) and the trust
  level the mirror derives from them for a lifecycle link;
- ``suspension``: suspended content, suspend tickets and how a request's hash finds its
  approval;
- ``opening``: explicit and provisional opens;
- ``state``: reading with the expiry outcome applied, eligible approvers, the roster;
- ``voting``: the one vote path (both profiles and the console), legs, assembly;
- ``history``: the approval's history rows;
- ``intake``: receipt intake, the SDK's push (verify, count a refusal, append, open the
  approval of a suspended receipt), single and batch, for both profiles.
"""

from apps.approvals.services.intake import (
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
    approver_key_register,
    approver_key_revoke,
    canonical_public_key,
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
from apps.approvals.services.state import (
    approval_get,
    approval_get_by_id,
    approval_refresh,
    approval_roster,
    approvals_sweep,
    eligible_approvers,
)
from apps.approvals.services.suspension import (
    approval_resolve,
    is_suspended,
    mirrored_content,
    ticket_hash,
)
from apps.approvals.services.voting import (
    approval_assembly,
    approval_vote,
    approval_vote_with_token,
)

__all__ = [
    "APPROVAL_ID_PREFIX",
    "PLACEHOLDER_DECISION_KEY",
    "IntakeOutcome",
    "Opened",
    "OpenedWithToken",
    "ReceiptRefusal",
    "Registered",
    "access_token_digest",
    "active_approver_key",
    "approval_assembly",
    "approval_get",
    "approval_get_by_id",
    "approval_open",
    "approval_open_for_suspended",
    "approval_open_with_access_token",
    "approval_refresh",
    "approval_resolve",
    "approval_roster",
    "approval_vote",
    "approval_vote_with_token",
    "approvals_sweep",
    "approver_key_register",
    "approver_key_revoke",
    "canonical_public_key",
    "claimed_action_hash",
    "eligible_approvers",
    "is_suspended",
    "mirror_trust_level",
    "mirrored_content",
    "receipt_intake",
    "receipt_intake_batch",
    "receipt_verify",
    "ticket_hash",
]
