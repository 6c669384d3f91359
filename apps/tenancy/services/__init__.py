"""Writes for orgs, API keys and memberships, one module per concern: ``orgs``, ``api_keys``
(issuing, rotating, revoking), ``api_key_auth`` (authenticating a presented key) and
``memberships`` and
``invitations``. Commands, the admin and APIs all call these; their public names are
importable from here."""

from apps.tenancy.services.api_key_auth import api_key_authenticate, api_key_recall
from apps.tenancy.services.api_keys import (
    KEY_PREFIX_LENGTH,
    KEY_PREFIX_TAG,
    IssuedKey,
    api_key_issue,
    api_key_revoke,
    api_key_rotate,
    key_digest,
)
from apps.tenancy.services.invitations import (
    Accepted,
    InvitationClosed,
    InvitationConflict,
    invitation_accept,
    invitation_create,
    invitation_from_token,
    invitation_link,
    invitation_open,
    invitation_resend,
    invitation_revoke,
)
from apps.tenancy.services.memberships import LastOwner, membership_add, membership_remove
from apps.tenancy.services.orgs import org_create, org_set_limits, org_set_policy_quorum

__all__ = [
    "KEY_PREFIX_LENGTH",
    "KEY_PREFIX_TAG",
    "Accepted",
    "InvitationClosed",
    "InvitationConflict",
    "IssuedKey",
    "LastOwner",
    "api_key_authenticate",
    "api_key_issue",
    "api_key_recall",
    "api_key_revoke",
    "api_key_rotate",
    "invitation_accept",
    "invitation_create",
    "invitation_from_token",
    "invitation_link",
    "invitation_open",
    "invitation_resend",
    "invitation_revoke",
    "key_digest",
    "membership_add",
    "membership_remove",
    "org_create",
    "org_set_limits",
    "org_set_policy_quorum",
]
