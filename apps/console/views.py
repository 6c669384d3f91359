"""The console's browser pages: the receipt verifier, the approver's devices page and the
approval's signing page.

The pages are static shells: verification and signing run in the browser
(static/console/*.js). The verifier page gets a Content-Security-Policy that forbids every
network request from its scripts, so what is pasted into it cannot leave the browser.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from http import HTTPStatus
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.approvals.models import ROSTER_RULE, Approval, ApproverKey, VoteDecision
from apps.approvals.selectors import approval_roster, approver_names, counted_votes
from apps.approvals.services import (
    approver_key_enroll,
    approver_key_relabel,
    approver_key_revoke_own,
    enrollment_challenge_new,
)
from apps.common.errors import DomainError, InvalidInput, InvalidJson, PayloadTooLarge
from apps.common.json_body import parse_json_body, read_json_bytes
from apps.common.request_guard import answers_json
from apps.common.responses import profile_error_response
from apps.console.services import (
    APPROVAL_ID_PREFIX,
    approval_by_access_token,
    approval_for_member,
    console_policy_vote,
    console_vote,
    member_key,
    member_keys,
    member_org,
    member_orgs,
    proposal_for_member,
    proposal_state,
    signed_in_with_single_sign_on,
)
from apps.tenancy.audit_trail import Actor

MAX_VOTE_BODY_BYTES = 64 * 1024

# No connect-src, form-action or navigation target besides this origin's own pages; the
# verifier's scripts may not fetch, post or open sockets at all.
VERIFY_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@require_GET
def verify_page(request: HttpRequest) -> HttpResponse:
    response = render(request, "console/verify.html")
    response["Content-Security-Policy"] = VERIFY_CSP
    response["Referrer-Policy"] = "no-referrer"
    return response


# --- The approver pages ----------------------------------------------------------------------

# The approver page may post its vote to this origin and nowhere else.
APPROVE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def _approver_page(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    response = render(request, template, context)
    response["Content-Security-Policy"] = APPROVE_CSP
    # The URL may hold a one-time token: never leak it in a Referer, never cache the page.
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response


# The session key of the one outstanding enrollment challenge (used once, then dropped).
ENROLLMENT_CHALLENGE_SESSION_KEY = "approver_enrollment_challenge"


def _device(key: ApproverKey) -> dict[str, Any]:
    return {
        "id": key.pk,
        "org": key.org.slug,
        "key_id": key.key_id,
        "label": key.label,
        "public_key": key.public_key,
        "state": key.state.value,
        "enrolled_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@require_GET
def approver_key_page(request: HttpRequest) -> HttpResponse:
    """This browser's approver key (created here, never leaving it) and, for a signed-in
    member, their devices: enroll this browser's key, label, revoke, replace a lost one."""
    orgs = member_orgs(request.user)
    keys = member_keys(request.user) if orgs else []
    page = {
        "signed_in": bool(orgs),
        "orgs": [org.slug for org in orgs],
        "devices": [_device(key) for key in keys],
        "challenge_url": reverse("console-device-challenge"),
        "enroll_url": reverse("console-device-enroll"),
        "csrf_token": get_token(request) if orgs else "",
    }
    context = {
        "devices": keys,
        "orgs": orgs,
        "page": page,
        "roster_rule": ROSTER_RULE,
        "signed_in": request.user.is_authenticated,
        "login_url": f"{reverse('admin:login')}?next={reverse('console-approver-key')}",
    }
    return _approver_page(request, "console/approver_key.html", context)


def _member_json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object; anything else is refused 400 (as the vote endpoints do)."""
    body = parse_json_body(read_json_bytes(request, max_bytes=MAX_VOTE_BODY_BYTES))
    if not isinstance(body, dict):
        raise InvalidJson("expected a JSON object")
    return body


def _member(request: HttpRequest) -> AbstractBaseUser:
    """The signed-in member (``_member_call`` answered 401 for anyone else)."""
    user = request.user
    if isinstance(user, AnonymousUser):
        raise NotSignedIn("sign in to the console to manage your keys")
    return user


class NotSignedIn(DomainError):
    status = HTTPStatus.UNAUTHORIZED
    code = "not_signed_in"


def _member_call(request: HttpRequest, call: Callable[[], JsonResponse]) -> JsonResponse:
    """Run a member's device request: signed in or 401; a refusal in the profile's body."""
    if not (request.user.is_authenticated and request.user.is_active):
        return _error(
            HTTPStatus.UNAUTHORIZED, "not_signed_in", "sign in to the console to manage your keys"
        )
    try:
        return call()
    except PayloadTooLarge as error:
        return _error(error.status, error.code, error.message)
    except InvalidJson as error:
        return _error(HTTPStatus.BAD_REQUEST, error.code, error.message)
    except DomainError as error:
        return _refusal(error)


@answers_json
@require_POST
def device_challenge(request: HttpRequest) -> JsonResponse:
    """A one-time challenge for the next enrollment, kept in this member's session."""

    def issue() -> JsonResponse:
        if _member_json_body(request):  # the page posts {}; nothing else is read
            raise InvalidJson("expected an empty JSON object")
        challenge = enrollment_challenge_new()
        request.session[ENROLLMENT_CHALLENGE_SESSION_KEY] = challenge
        return JsonResponse({"challenge": challenge})

    return _member_call(request, issue)


@answers_json
@require_POST
def device_enroll(request: HttpRequest) -> JsonResponse:
    """``{org, label, public_key, signature, replaces?}``: enroll the browser's key (its
    signature over the session's challenge proves the browser holds it)."""

    def enroll() -> JsonResponse:
        body = _member_json_body(request)
        allowed = {"org", "label", "public_key", "signature", "replaces"}
        if set(body) - allowed or not {"org", "label", "public_key", "signature"} <= set(body):
            raise InvalidInput("expected {org, label, public_key, signature, replaces?}")
        org = member_org(request.user, body["org"])
        replaces = None
        if body.get("replaces") is not None:
            if not isinstance(body["replaces"], int):
                raise InvalidInput("replaces: the id of the key this device replaces")
            replaces = member_key(request.user, body["replaces"])
        # Used once, whatever the outcome: a refused proof needs a new challenge.
        challenge = request.session.pop(ENROLLMENT_CHALLENGE_SESSION_KEY, None)
        if not isinstance(body["public_key"], str):
            raise InvalidInput("public_key: the key in standard base64")
        key = approver_key_enroll(
            org=org, member=_member(request), public_key=body["public_key"],
            label=body["label"], challenge=challenge, signature=body["signature"],
            single_sign_on=signed_in_with_single_sign_on(request), replaces=replaces,
        )  # fmt: skip
        return JsonResponse(_device(key), status=HTTPStatus.CREATED)

    return _member_call(request, enroll)


@answers_json
@require_POST
def device_label(request: HttpRequest, key_pk: int) -> JsonResponse:
    """``{label}``: rename one of the member's own devices."""

    def relabel() -> JsonResponse:
        body = _member_json_body(request)  # a malformed body is refused before any lookup
        key = member_key(request.user, key_pk)
        if set(body) != {"label"}:
            raise InvalidInput("expected {label}")
        key = approver_key_relabel(key=key, label=body["label"], actor=Actor.console(request.user))
        return JsonResponse(_device(key))

    return _member_call(request, relabel)


@answers_json
@require_POST
def device_revoke(request: HttpRequest, key_pk: int) -> JsonResponse:
    """Revoke one of the member's own devices (lost, retired): its votes stop counting."""

    def revoke() -> JsonResponse:
        if _member_json_body(request):  # the page posts {}; refused before any lookup
            raise InvalidJson("expected an empty JSON object")
        key = approver_key_revoke_own(key=member_key(request.user, key_pk), member=_member(request))
        return JsonResponse(_device(key))

    return _member_call(request, revoke)


def _resolve(request: HttpRequest, ref: str) -> tuple[Approval | None, str]:
    """The approval a link names, and how it was reached (``token`` or ``console``)."""
    approval = approval_by_access_token(ref)
    if approval is not None:
        return approval, "token"
    if ref.startswith(APPROVAL_ID_PREFIX):
        return approval_for_member(request.user, ref), "console"
    return None, "token"


def _votes(approval: Approval, names: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "approver_public_key": vote.approver_public_key,
            "approver": names.get(vote.approver_public_key, vote.approver_public_key),
            "decision": vote.decision,
            "voted_at": vote.voted_at.isoformat(),
            "with_leg": bool(vote.record),
        }
        for vote in counted_votes(approval)
    ]


def approval_state(approval: Approval) -> dict[str, Any]:
    """What the page shows and signs; ``suspended_content`` is the stored JSON text.

    ``roster`` is the one a quorum leg signs over: frozen at the first vote, until then the
    one that vote would freeze (server.md §6).
    """
    roster = approval_roster(approval)
    voters = list(counted_votes(approval).values_list("approver_public_key", flat=True))
    names = approver_names(approval.org_id, [*roster, *voters])
    return {
        "approval_id": approval.approval_id,
        "action_hash": approval.action_hash,
        "status": approval.status,
        "flag": approval.flag,
        "threshold": approval.threshold,
        "lane": approval.lane,
        "approved_count": approval.approved_count,
        "roster": roster,
        # The person and device of each key (the page names people, never raw keys).
        "key_names": names,
        "roster_rule": ROSTER_RULE,
        "rule_id": approval.rule_id,
        "workflow": approval.workflow,
        "account": approval.account,
        "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
        "resolved_at": approval.resolved_at.isoformat() if approval.resolved_at else None,
        "votes": _votes(approval, names),
        "suspended_content": approval.suspended_content,
    }


def outcome_summary(approval: Approval, now: datetime) -> dict[str, Any]:
    """What the page shows of an approval that takes no more votes: its outcome only.

    Nothing of the action: not its content, nor the rule, workflow or account it came
    with, nor its ``action_hash`` (a hash of a guessable content would confirm a guess).
    """
    return {
        "approval_id": approval.approval_id,
        # A pending approval past its expiry is shown as what it is to a voter: expired.
        "state": approval.voter_state_at(now),
        "status": approval.status,
        "flag": approval.flag,
        "decided_at": approval.resolved_at.isoformat() if approval.resolved_at else None,
        "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
        "threshold": approval.threshold,
        "lane": approval.lane,
        "eligible": len(approval_roster(approval)),
        "approved_count": approval.approved_count,
        "rejected_count": counted_votes(approval).filter(decision=VoteDecision.REJECTED).count(),
        "local_decision": approval.local_decision,
    }


@require_GET
def approval_page(request: HttpRequest, ref: str) -> HttpResponse:
    approval, mode = _resolve(request, ref)
    if approval is None:
        if mode == "console" and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        response = _approver_page(request, "console/approval_missing.html", {})
        response.status_code = HTTPStatus.NOT_FOUND
        return response
    now = timezone.now()
    if not approval.takes_votes_at(now):
        # Settled or expired: the outcome only, no action content and no vote form.
        return _approver_page(
            request, "console/approval.html", {"outcome": outcome_summary(approval, now)}
        )
    page = {
        **approval_state(approval),
        "mode": mode,
        # The co-signed leg is what the SDK assembles the L1 receipt from (key-scoped);
        # a team-path token vote is the token alone, as on POST /v1/approvals/{id}/token.
        "with_leg": mode == "console",
        "vote_url": reverse("console-approval-vote", args=[ref]),
        # The signed-in member's own keys in this org and where each stands, so the page can
        # say why this browser's key cannot vote yet (pending confirmation, revoked).
        # (A page reached by its one-time token keeps the token's org context: none here.)
        "your_keys": {
            key.public_key: key.state.value
            for key in (member_keys(request.user) if mode == "console" else [])
            if key.org_id == approval.org_id
        },
        "csrf_token": get_token(request),
    }
    return _approver_page(request, "console/approval.html", {"page": page})


def _error(status: HTTPStatus, code: str, message: str) -> JsonResponse:
    """A refusal of the request itself (no such approval, a body of the wrong shape): the
    same status on both profiles, in the deployment's error body."""
    return profile_error_response(code=code, message=message, status=status)


def _refusal(error: DomainError) -> JsonResponse:
    """The vote's refusal as the deployment's profile answers the same vote on its API
    (an expired approval: 410 on team-path, 409 key-scoped)."""
    return profile_error_response(
        code=error.code,
        message=error.message,
        status=error.status,
        teampath_status=error.teampath_status,
    )


@answers_json
@require_POST
def approval_vote_endpoint(request: HttpRequest, ref: str) -> JsonResponse:
    """The page's vote: ``{token, record?, co_sig_b64?}`` → the approval's new state.

    The body is read by the service's one JSON body parser (``apps.common.json_body``); its
    refusals answer 400 ``invalid_json`` (413 ``payload_too_large``), as on the team path.
    """
    approval, _ = _resolve(request, ref)
    if approval is None:
        return _error(HTTPStatus.NOT_FOUND, "approval_not_found", "no such approval")
    try:
        body = parse_json_body(read_json_bytes(request, max_bytes=MAX_VOTE_BODY_BYTES))
    except PayloadTooLarge as error:
        return _error(error.status, error.code, error.message)
    except InvalidJson as error:
        return _error(HTTPStatus.BAD_REQUEST, error.code, error.message)
    if not isinstance(body, dict) or set(body) - {"token", "record", "co_sig_b64"}:
        return _error(
            HTTPStatus.BAD_REQUEST, "invalid_input", "expected {token, record?, co_sig_b64?}"
        )
    try:
        settled = console_vote(
            approval=approval,
            token_b64=body.get("token"),
            record=body.get("record"),
            co_sig_b64=body.get("co_sig_b64"),
        )
    except DomainError as error:
        return _refusal(error)
    return JsonResponse(approval_state(settled))


# --- The signing page of a co-signed policy change ---------------------------------------------


@require_GET
def policy_proposal_page(request: HttpRequest, policy_id: str) -> HttpResponse:
    """A proposed policy change for a signed-in member: the diff, the statement their
    device key signs (``policy:deploy``), the votes so far."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("admin:login"))
    proposal = proposal_for_member(request.user, policy_id)
    if proposal is None:
        response = _approver_page(request, "console/approval_missing.html", {})
        response.status_code = HTTPStatus.NOT_FOUND
        return response
    page = {
        **proposal_state(proposal),
        "takes_votes": proposal.takes_votes,
        "vote_url": reverse("console-policy-proposal-vote", args=[policy_id]),
        "csrf_token": get_token(request),
    }
    return _approver_page(request, "console/policy_proposal.html", {"page": page})


@answers_json
@require_POST
def policy_proposal_vote_endpoint(request: HttpRequest, policy_id: str) -> JsonResponse:
    """The page's vote: ``{token}`` → the proposal's new state. A malformed body is
    refused before the proposal is looked up."""
    try:
        body = parse_json_body(read_json_bytes(request, max_bytes=MAX_VOTE_BODY_BYTES))
    except PayloadTooLarge as error:
        return _error(error.status, error.code, error.message)
    except InvalidJson as error:
        return _error(HTTPStatus.BAD_REQUEST, error.code, error.message)
    if not isinstance(body, dict) or set(body) != {"token"}:
        return _error(HTTPStatus.BAD_REQUEST, "invalid_input", "expected {token}")
    proposal = proposal_for_member(request.user, policy_id)
    if proposal is None:
        return _error(HTTPStatus.NOT_FOUND, "policy_proposal_not_found", "no such proposal")
    try:
        voted = console_policy_vote(
            proposal=proposal,
            token_b64=body["token"],
            user=request.user,  # type: ignore[arg-type]
        )
    except DomainError as error:
        return _refusal(error)
    return JsonResponse({**proposal_state(voted), "takes_votes": voted.takes_votes})
