"""The approval factories build rows the model and the services accept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.approvals.models import ApprovalStatus
from apps.approvals.selectors import approval_as_of, approval_get_by_id, eligible_approvers
from apps.approvals.services import active_approver_key, canonical_public_key
from tests.approvals.conftest import Approver
from tests.approvals.model_factories import ApprovalFactory, ApproverKeyFactory

pytestmark = pytest.mark.django_db

# The roster stays empty until the first vote freezes it, in approvals the services open
# too; the model declares it without blank=True, so full_clean leaves it out here.
UNTIL_THE_FIRST_VOTE = ["roster"]


def test_an_approver_key_is_clean_canonical_and_active(cast) -> None:
    alice = Approver("alice")
    key = ApproverKeyFactory(org=cast.acme, key_id="alice", approver=alice)
    key.full_clean()
    assert key.public_key == alice.public == canonical_public_key(alice.public)
    assert active_approver_key(org=cast.acme, public_key=key.public_key)


def test_approver_keys_differ_from_one_call_to_the_next(cast) -> None:
    first, second = ApproverKeyFactory(org=cast.acme), ApproverKeyFactory(org=cast.acme)
    assert first.key_id != second.key_id
    assert first.public_key != second.public_key


def test_a_pending_approval_is_clean_found_by_id_and_stays_pending(cast) -> None:
    key = ApproverKeyFactory(org=cast.acme)
    approval = ApprovalFactory(org=cast.acme)
    approval.full_clean(exclude=UNTIL_THE_FIRST_VOTE)
    assert approval_get_by_id(org=cast.acme, approval_id=approval.approval_id) == approval
    assert approval_as_of(approval).status == ApprovalStatus.PENDING
    assert (approval.lane, approval.resolved_at) == ("single", None)
    assert eligible_approvers(approval) == [key.public_key]


def test_a_decided_approval_keeps_its_age_and_resolution(cast) -> None:
    created = timezone.now() - timedelta(minutes=3)
    approval = ApprovalFactory(org=cast.acme, status=ApprovalStatus.REJECTED, created_at=created)
    approval.full_clean(exclude=UNTIL_THE_FIRST_VOTE)
    approval.refresh_from_db()
    assert approval.created_at == created
    assert approval.resolved_at is not None
    assert approval.resolved_at > created
