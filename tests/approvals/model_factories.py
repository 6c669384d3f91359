"""Model factories for approval rows, beside the service-built cast (tests/conftest.py).

They write rows directly, the way the console or SQL could, for states the services only
reach through many steps: a decided approval of a given age, a key written around
``approver_key_register``. Pass the org: ``ApprovalFactory(org=cast.acme)``. Opening,
voting and registering through the services stays the way to test those services.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.approvals.models import Approval, ApprovalStatus, ApproverKey
from apps.approvals.services.opening import APPROVAL_ID_PREFIX
from tests.approvals.conftest import Approver


class ApproverKeyFactory(DjangoModelFactory):
    """An active key. To sign tokens with it, pass the device: ``approver=Approver("alice")``."""

    class Meta:
        model = ApproverKey

    class Params:
        approver = factory.LazyAttribute(lambda key: Approver(key.key_id))

    key_id = factory.Sequence(lambda n: f"approver-{n}")
    public_key = factory.LazyAttribute(lambda key: key.approver.public)
    label = factory.LazyAttribute(lambda key: f"{key.key_id}'s device")
    confirmed_at = factory.LazyFunction(timezone.now)


class ApprovalFactory(DjangoModelFactory):
    """An approval opened by its action hash (content not yet known), pending by default.

    A settled ``status`` gets ``resolved_at`` now unless given; ``created_at`` may be given
    too (the model sets it on insert, so the factory writes it just after).
    """

    class Meta:
        model = Approval

    approval_id = factory.LazyFunction(lambda: APPROVAL_ID_PREFIX + secrets.token_urlsafe(18))
    action_hash = factory.LazyFunction(lambda: secrets.token_hex(32))
    status = ApprovalStatus.PENDING
    threshold = 1
    rule_id = "payments.review"
    resolved_at = factory.LazyAttribute(
        lambda approval: None if approval.status == ApprovalStatus.PENDING else timezone.now()
    )

    @classmethod
    def _create(
        cls,
        model_class: type[Approval],
        *args: Any,
        created_at: datetime | None = None,
        **kwargs: Any,
    ) -> Approval:
        approval: Approval = super()._create(model_class, *args, **kwargs)
        if created_at is not None:
            model_class.objects.filter(pk=approval.pk).update(created_at=created_at)
            approval.created_at = created_at
        return approval
