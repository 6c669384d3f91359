"""A member enrolls their own approver key: possession proven over a one-time challenge,
bound to them, pending until an owner or manager confirms it (or single sign-on does, when
the org says so); labels, revocation, a replacement for a lost device; and the roster rule
(server.md §6) for a key enrolled or confirmed after an approval opened."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from apps.approvals.errors import ApproverKeyRefused, RosterTooSmall
from apps.approvals.models import ApproverKey, ApproverKeyState
from apps.approvals.selectors import approver_names, eligible_approvers
from apps.approvals.services import (
    approval_open,
    approval_vote,
    approver_key_confirm,
    approver_key_enroll,
    approver_key_relabel,
    approver_key_revoke_own,
    enrollment_challenge_new,
    enrollment_message,
)
from apps.common.errors import InvalidInput, NotFound
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import AuditKind, Org, OrgAuditEvent
from tests.approvals.conftest import Approver
from tests.console.test_approve_page import stored_content, suspended_receipt
from tests.receipts.factories import Agent

pytestmark = pytest.mark.django_db


def member(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def enroll(
    org: Org, who: Any, device: Approver, label: str = "work laptop", **kwargs: Any
) -> ApproverKey:
    """Enroll ``device``'s key as its browser would: sign the service's challenge."""
    challenge = kwargs.pop("challenge", None) or enrollment_challenge_new()
    message = enrollment_message(org=org, challenge=challenge, public_key=device.public)
    signature = base64.b64encode(device.key.sign(message).signature).decode()
    return approver_key_enroll(
        org=org, member=who, public_key=device.public, label=label, challenge=challenge,
        signature=signature, **kwargs,
    )  # fmt: skip


def test_an_enrolled_key_is_bound_to_its_member_and_pending(cast) -> None:
    viewer = member("acme-viewer")
    key = enroll(cast.acme, viewer, Approver("phone"), label="  my phone ")
    assert (key.member_id, key.label, key.state) == (viewer.pk, "my phone", "pending")
    assert key.created_via == "enrollment"
    audit = OrgAuditEvent.objects.get(org=cast.acme, kind=AuditKind.APPROVER_KEY_ENROLLED)
    assert audit.user_id == viewer.pk
    assert audit.detail["state"] == "pending"
    assert "pending confirmation" in audit.summary
    assert approver_names(cast.acme.pk)[key.public_key] == "acme-viewer (my phone)"


def test_a_proof_that_does_not_verify_is_refused(cast) -> None:
    device, impostor = Approver("device"), Approver("impostor")
    challenge = enrollment_challenge_new()
    message = enrollment_message(org=cast.acme, challenge=challenge, public_key=device.public)
    forged = base64.b64encode(impostor.key.sign(message).signature).decode()
    with pytest.raises(ApproverKeyRefused, match="must hold it"):
        approver_key_enroll(
            org=cast.acme, member=member("acme-viewer"), public_key=device.public,
            label="laptop", challenge=challenge, signature=forged,
        )  # fmt: skip
    # A proof made for another org (or another challenge) is worth nothing here either.
    other = enrollment_message(org=cast.globex, challenge=challenge, public_key=device.public)
    with pytest.raises(ApproverKeyRefused):
        approver_key_enroll(
            org=cast.acme, member=member("acme-viewer"), public_key=device.public,
            label="laptop", challenge=challenge,
            signature=base64.b64encode(device.key.sign(other).signature).decode(),
        )  # fmt: skip
    assert not ApproverKey.objects.exists()


def test_enrolling_needs_an_outstanding_challenge_a_label_and_a_new_key(cast) -> None:
    device = Approver("device")
    with pytest.raises(ApproverKeyRefused, match="no enrollment challenge"):
        approver_key_enroll(
            org=cast.acme, member=member("acme-viewer"), public_key=device.public,
            label="laptop", challenge=None, signature="AA==",
        )  # fmt: skip
    with pytest.raises(InvalidInput, match="label"):
        enroll(cast.acme, member("acme-viewer"), device, label=" ")
    enroll(cast.acme, member("acme-viewer"), device)
    with pytest.raises(ApproverKeyRefused, match="already enrolled"):
        enroll(cast.acme, member("acme-owner"), device)


def test_a_pending_key_does_not_count_until_it_is_confirmed(cast) -> None:
    device = Approver("device")
    key = enroll(cast.acme, member("acme-viewer"), device)
    content = stored_content(suspended_receipt(Agent()))
    approval = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content
    ).approval
    assert eligible_approvers(approval) == []
    token = base64.b64decode(device.token(content, scope=approval.rule_id))
    with pytest.raises(Exception, match="not registered"):
        approval_vote(org=cast.acme, action_hash=approval.action_hash, token=token)
    confirmed = approver_key_confirm(key=key, actor=Actor.console(member("acme-manager")))
    assert confirmed.state == ApproverKeyState.ACTIVE
    assert confirmed.confirmed_by_id == member("acme-manager").pk
    # Enrolled and confirmed after the approval opened, before its first vote: it counts.
    assert eligible_approvers(approval) == [device.public]
    voted = approval_vote(org=cast.acme, action_hash=approval.action_hash, token=token)
    assert voted.status == "approved"
    assert OrgAuditEvent.objects.filter(kind=AuditKind.APPROVER_KEY_CONFIRMED).count() == 1


def test_a_key_confirmed_after_the_first_vote_is_not_on_that_roster(cast) -> None:
    alice, late = Approver("alice"), Approver("late")
    alice_key = enroll(cast.acme, member("acme-viewer"), alice, label="alice's laptop")
    approver_key_confirm(key=alice_key, actor=Actor.console(member("acme-owner")))
    late_key = enroll(cast.acme, member("acme-auditor"), late, label="auditor's phone")
    content = stored_content(suspended_receipt(Agent()))
    approval = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content, threshold=2
    ).approval
    # One active key, threshold two: the first vote is refused, naming both numbers.
    with pytest.raises(RosterTooSmall, match=r"needs 2 .* only 1"):
        approval_vote(
            org=cast.acme, action_hash=approval.action_hash,
            token=base64.b64decode(alice.token(content, scope=approval.rule_id)),
        )  # fmt: skip
    approver_key_confirm(key=late_key, actor=Actor.console(member("acme-owner")))
    third = Approver("third")
    third_key = enroll(cast.acme, member("acme-manager"), third, label="manager's laptop")
    approval_vote(
        org=cast.acme, action_hash=approval.action_hash,
        token=base64.b64decode(alice.token(content, scope=approval.rule_id)),
    )  # fmt: skip
    approver_key_confirm(key=third_key, actor=Actor.console(member("acme-owner")))
    approval.refresh_from_db()
    assert approval.roster == sorted([alice.public, late.public])
    assert third.public not in eligible_approvers(approval)


def test_single_sign_on_confirms_at_once_only_where_the_org_says_so(cast) -> None:
    viewer = member("acme-viewer")
    assert enroll(cast.acme, viewer, Approver("a"), single_sign_on=True).state == "pending"
    Org.objects.filter(pk=cast.acme.pk).update(confirm_sso_approver_keys=True)
    cast.acme.refresh_from_db()
    assert enroll(cast.acme, viewer, Approver("b"), single_sign_on=False).state == "pending"
    key = enroll(cast.acme, viewer, Approver("c"), single_sign_on=True)
    assert key.state == "active"
    assert (
        "confirmed by single sign-on"
        in OrgAuditEvent.objects.filter(kind=AuditKind.APPROVER_KEY_ENROLLED)
        .order_by("-pk")
        .first()
        .summary
    )  # type: ignore[union-attr]


def test_a_member_labels_revokes_and_replaces_their_own_keys(cast) -> None:
    viewer = member("acme-viewer")
    lost = enroll(cast.acme, viewer, Approver("lost"), label="old phone")
    approver_key_confirm(key=lost, actor=Actor.console(member("acme-owner")))
    approver_key_relabel(key=lost, label="lost phone", actor=Actor.console(viewer))
    assert ApproverKey.objects.get(pk=lost.pk).label == "lost phone"
    with pytest.raises(NotFound):
        approver_key_revoke_own(key=lost, member=member("acme-auditor"))
    with pytest.raises(NotFound):  # someone else's key cannot be "replaced" either
        enroll(cast.acme, member("acme-auditor"), Approver("x"), replaces=lost)
    replacement = enroll(cast.acme, viewer, Approver("new"), label="new phone", replaces=lost)
    lost.refresh_from_db()
    assert lost.state == "revoked"
    assert replacement.state == "pending"
    assert OrgAuditEvent.objects.get(
        kind=AuditKind.APPROVER_KEY_ENROLLED, detail__replaces=lost.key_id
    )
    assert (
        "replaced by a new device"
        in OrgAuditEvent.objects.get(kind=AuditKind.APPROVER_KEY_REVOKED).summary
    )
    approver_key_revoke_own(key=replacement, member=viewer)
    assert ApproverKey.objects.get(pk=replacement.pk).state == "revoked"
    with pytest.raises(ApproverKeyRefused, match="revoked"):
        approver_key_confirm(key=replacement, actor=Actor.console(member("acme-owner")))
