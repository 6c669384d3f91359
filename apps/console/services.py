"""What the approver page needs beyond apps/approvals/services: resolving the approval a page
link names (with its org context), and submitting the browser-signed vote.

Two kinds of link reach ``/approve/<ref>``:

* the team-path profile's one-time ``token`` (``POST /v1/approvals`` shows it once and stores
  ``blake3(token)`` in ``Approval.access_token_digest``): the link is the credential, and the
  approval is found by that digest before any org is known (a ``SECURITY DEFINER`` function
  under row-level security, see migration 0001);
* a console link ``/approve/<approval_id>`` for a signed-in console member of the approval's
  org (the Django admin session), used for key-scoped approvals, which have no such token.

Either way the vote itself is authorized by the approver's signature: it goes through
``approval_vote_with_token``, the one vote path the two API profiles use too.

A signed-in member also enrolls, labels and revokes their own approver keys from ``/approve/``
(the services are ``apps.approvals.services.keys``); what is here finds their orgs and keys
with the right org context, and says whether they signed in with single sign-on.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.contrib.auth import BACKEND_SESSION_KEY, load_backend
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.http import HttpRequest

from apps.approvals.models import Approval, ApproverKey
from apps.approvals.selectors import approval_as_of, member_approver_keys
from apps.approvals.services import access_token_digest, approval_vote_with_token
from apps.common.errors import InvalidInput, NotFound
from apps.policy.models import PolicyProposal
from apps.policy.selectors import proposal_statement
from apps.policy.statement import POLICY_DEPLOY_SCOPE, statement_bytes
from apps.policy.votes import policy_proposal_vote
from apps.tenancy.audit_trail import Actor
from apps.tenancy.middleware import member_org_ids
from apps.tenancy.models import Org
from apps.tenancy.org_context import activate_all_orgs, activate_orgs

APPROVAL_ID_PREFIX = "apr_"
MAX_TOKEN_BYTES = 16 * 1024


def approval_by_access_token(token: str) -> Approval | None:
    """The approval whose one-time page token is ``token``; its org becomes the context."""
    if not token:
        return None
    digest = access_token_digest(token)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM mirror_approval_by_token_digest(%s)", [digest])
            row = cursor.fetchone()
        if row is None:
            return None
        approval_pk, org_id = int(row[0]), int(row[1])
        activate_orgs([org_id])
        found = Approval.objects.filter(pk=approval_pk).first()
    else:
        found = Approval.objects.filter(access_token_digest=digest).first()
    return approval_as_of(found) if found is not None else None


def approval_for_member(
    user: AbstractBaseUser | AnonymousUser, approval_id: str
) -> Approval | None:
    """The approval ``approval_id`` if ``user`` may see it (a member of its org, or a
    superuser); the user's orgs become the context. Another org's approval is None."""
    if not (user.is_authenticated and user.is_active):
        return None
    if getattr(user, "is_superuser", False):
        activate_all_orgs()
        found = Approval.objects.filter(approval_id=approval_id).first()
    else:
        org_ids = member_org_ids(int(user.pk))
        activate_orgs(org_ids)
        found = Approval.objects.filter(approval_id=approval_id, org_id__in=org_ids).first()
    return approval_as_of(found) if found is not None else None


def _token_bytes(token_b64: object) -> bytes:
    if not isinstance(token_b64, str) or not token_b64:
        raise InvalidInput("token: required, the approver's signed token in base64")
    if len(token_b64) > MAX_TOKEN_BYTES:
        raise InvalidInput("token: too long")
    try:
        return base64.b64decode(token_b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("token: not valid base64") from None


def console_vote(
    *, approval: Approval, token_b64: object, record: object = None, co_sig_b64: object = None
) -> Approval:
    """Record the browser-signed vote through ``approval_vote_with_token``.

    The decision is the one the token carries. ``record`` + ``co_sig_b64`` are the
    approver's co-signed leg (approvals.md §5/§6), verified and stored verbatim.
    """
    token = _token_bytes(token_b64)
    if record is not None and not isinstance(record, str):
        raise InvalidInput("record: the ApproverRecord as JSON text")
    if co_sig_b64 is not None and not isinstance(co_sig_b64, str):
        raise InvalidInput("co_sig_b64: a base64 string")
    return approval_vote_with_token(
        approval=approval, token=token, record=record, co_sig_b64=co_sig_b64
    )


# --- A member's own approver keys ---------------------------------------------------------


def member_orgs(user: AbstractBaseUser | AnonymousUser) -> list[Org]:
    """The orgs ``user`` is a member of (where they may enroll keys); they become the
    context. Nobody signed in: none."""
    if not (user.is_authenticated and user.is_active):
        return []
    org_ids = member_org_ids(int(user.pk))
    activate_orgs(org_ids)
    return list(Org.objects.filter(pk__in=org_ids).order_by("slug"))


def member_keys(user: AbstractBaseUser | AnonymousUser) -> list[ApproverKey]:
    orgs = member_orgs(user)
    if not orgs:
        return []
    return list(member_approver_keys(member_id=int(str(user.pk)), org_ids=[o.pk for o in orgs]))


def member_key(user: AbstractBaseUser | AnonymousUser, key_pk: int) -> ApproverKey:
    """One of ``user``'s own keys; anyone else's (or none) is not found."""
    for key in member_keys(user):
        if key.pk == key_pk:
            return key
    raise NotFound("not one of your approver keys")


def member_org(user: AbstractBaseUser | AnonymousUser, slug: object) -> Org:
    for org in member_orgs(user):
        if org.slug == slug:
            return org
    raise NotFound("org: not an org you are a member of")


def signed_in_with_single_sign_on(request: HttpRequest) -> bool:
    """Whether this session was signed in by a single sign-on backend: the authentication
    backend Django recorded for the session says ``single_sign_on = True`` (a password
    sign-in's ModelBackend does not)."""
    path = request.session.get(BACKEND_SESSION_KEY)
    if not path:
        return False
    try:
        backend = load_backend(path)
    except ImportError:
        return False
    return bool(getattr(backend, "single_sign_on", False))


def proposal_for_member(
    user: AbstractBaseUser | AnonymousUser, policy_id: str
) -> PolicyProposal | None:
    """The newest proposal of ``policy_id`` in an org ``user`` is a member of (or any, for
    a superuser); the user's orgs become the context. None when there is none to see."""
    if not (user.is_authenticated and user.is_active):
        return None
    proposals = PolicyProposal.objects.select_related("org", "version", "previous_version")
    if getattr(user, "is_superuser", False):
        activate_all_orgs()
    else:
        org_ids = member_org_ids(int(user.pk))
        activate_orgs(org_ids)
        proposals = proposals.filter(org_id__in=org_ids)
    return proposals.filter(version__policy_id=policy_id).order_by("-created_at", "-id").first()


def proposal_state(proposal: PolicyProposal) -> dict[str, Any]:
    """What the proposal's signing page shows and signs: the statement (the page
    recomputes its canonical bytes and signs those), the diff, the votes so far."""
    statement = proposal_statement(proposal)
    names = dict(
        ApproverKey.objects.filter(org_id=proposal.org_id).values_list("public_key", "key_id")
    )
    return {
        "policy_id": proposal.version.policy_id,
        "org": proposal.org.slug,
        "status": proposal.status,
        "quorum": proposal.quorum,
        "approved_count": proposal.approved_count,
        "scope": POLICY_DEPLOY_SCOPE,
        "statement": statement,
        "statement_b64": base64.b64encode(statement_bytes(statement)).decode(),
        "roster": list(proposal.roster),
        "diff": proposal.diff,
        "toml": proposal.version.toml,
        "proposed_by": proposal.proposed_by_name,
        "break_glass_reason": proposal.break_glass_reason,
        "votes": [
            {"approver_public_key": vote.approver_public_key,
             "key_id": names.get(vote.approver_public_key, vote.approver_key_id),
             "decision": vote.decision, "voted_at": vote.voted_at.isoformat()}
            for vote in proposal.votes.order_by("voted_at", "id")
        ],
    }  # fmt: skip


def console_policy_vote(
    *, proposal: PolicyProposal, token_b64: object, user: AbstractBaseUser
) -> PolicyProposal:
    """The signing page's vote on a policy change: the vote path of the APIs, with the
    signed-in member as the one who submits it (a proposer cannot vote on their own)."""
    return policy_proposal_vote(
        org=proposal.org,
        policy_id=proposal.version.policy_id,
        token=_token_bytes(token_b64),
        actor=Actor.console(user),
    )
