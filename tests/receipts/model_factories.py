"""The model factory for mirror entries, beside the service-built cast (tests/conftest.py).

A ``MirrorEntry`` is only valid inside its org's chain (seq, prev_chain_hash, chain_hash
and the ``MirrorHead`` move together under the head lock), so the factory appends through
the one write path, ``receipt_append``, a receipt signed by an ``Agent``
(tests/receipts/factories.py, which stays free of Django for deploy/bench).

``MirrorEntryFactory(org=cast.acme)`` appends a fresh L0 receipt; pass ``receipt=`` for a
given one (a dict as ``Agent.receipt()`` builds it). Fields outside the chain hash
(``received_at``, ``superseded_by``) may be overridden; the others are the append's.
"""

from __future__ import annotations

from typing import Any

import factory
from factory.django import DjangoModelFactory

from apps.approvals.services import mirror_trust_level
from apps.receipts.models import MirrorEntry
from apps.receipts.services import receipt_append
from apps.receipts.verifier import parse_json, verify_receipt_value
from apps.tenancy.models import Org
from tests.receipts.factories import Agent, as_text

OUTSIDE_THE_CHAIN = frozenset({"received_at", "superseded_by"})


class MirrorEntryFactory(DjangoModelFactory):
    class Meta:
        model = MirrorEntry

    receipt = factory.LazyFunction(lambda: Agent().receipt())

    @classmethod
    def _build(cls, model_class: type[MirrorEntry], *args: Any, **kwargs: Any) -> MirrorEntry:
        raise TypeError("a mirror entry exists only appended to its chain: use create")

    @classmethod
    def _create(
        cls,
        model_class: type[MirrorEntry],
        *args: Any,
        org: Org,
        receipt: dict[str, Any],
        **overrides: Any,
    ) -> MirrorEntry:
        if not set(overrides) <= OUTSIDE_THE_CHAIN:
            unknown = ", ".join(sorted(set(overrides) - OUTSIDE_THE_CHAIN))
            raise TypeError(f"{unknown}: set by the append (part of the chain)")
        verdict = verify_receipt_value(parse_json(as_text(receipt)))
        assert verdict.is_valid, verdict.detail
        assert verdict.receipt is not None
        # The level the push API stores (an approver key of the org makes a link L1).
        trust_level = mirror_trust_level(org=org, verdict=verdict)
        outcome = receipt_append(org=org, receipt=verdict.receipt, trust_level=trust_level)
        if overrides:
            model_class.objects.filter(org=org, seq=outcome.seq).update(**overrides)
        return model_class.objects.get(org=org, seq=outcome.seq)
