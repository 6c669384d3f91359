"""The mirror-entry factory appends entries the model and the chain check accept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.receipts.models import MirrorEntry, MirrorHead
from apps.receipts.selectors import mirror_chain_check
from tests.receipts.factories import Agent
from tests.receipts.model_factories import MirrorEntryFactory

pytestmark = pytest.mark.django_db


def test_entries_are_clean_and_chained(cast) -> None:
    agent = Agent()
    first = MirrorEntryFactory(org=cast.acme)
    second, third = (MirrorEntryFactory(org=cast.acme, receipt=r) for r in agent.session("s", 2))
    for entry in (first, second, third):
        entry.full_clean()
    assert [first.seq, second.seq, third.seq] == [1, 2, 3]
    assert second.prev_chain_hash == first.chain_hash
    assert (third.session_id, third.session_seq) == ("s", 1)
    check = mirror_chain_check(org=cast.acme)
    assert check.ok, check.problem
    assert (check.size, check.head) == (3, third.chain_hash)
    assert MirrorHead.objects.get(org=cast.acme).size == 3


def test_received_at_is_overridden_outside_the_chain(cast) -> None:
    earlier = timezone.now() - timedelta(days=10)
    entry = MirrorEntryFactory(org=cast.acme, received_at=earlier)
    assert entry.received_at == earlier
    assert mirror_chain_check(org=cast.acme).ok


def test_fields_of_the_chain_are_not_overridden_nor_entries_built(cast) -> None:
    with pytest.raises(TypeError, match="seq: set by the append"):
        MirrorEntryFactory(org=cast.acme, seq=7)
    with pytest.raises(TypeError, match="appended to its chain"):
        MirrorEntryFactory.build(org=cast.acme)
    assert not MirrorEntry.objects.exists()
