"""Two publishers at once (the periodic one and an operator's publish_checkpoint): the
lock makes them take turns; epochs stay gapless and every node is stored once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from apps.transparency.models import Checkpoint, OrgLog, TopLeaf
from apps.transparency.services import transparency_publish_epoch
from apps.transparency.tree import merkle
from tests.transparency.factories import mirror

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_concurrent_epoch_runs_take_turns(cast) -> None:
    errors: list[BaseException] = []
    for round_number in range(3):
        mirror(cast.acme, [(bytes([round_number, n]) * 16).hex() for n in range(7)])
        mirror(cast.globex, [(bytes([100 + round_number, n]) * 16).hex() for n in range(3)])
        barrier = threading.Barrier(3)

        def publish(barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                transparency_publish_epoch()
            except BaseException as error:  # reported below
                errors.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=publish) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert list(Checkpoint.objects.order_by("epoch").values_list("epoch", "size")) == [
        (1, 2),
        (2, 4),
        (3, 6),
    ]
    for org, count in ((cast.acme, 21), (cast.globex, 9)):
        log = OrgLog.objects.get(org=org)
        assert (log.tree_size, log.published_size) == (count, count)
    leaves = [bytes(leaf.leaf) for leaf in TopLeaf.objects.order_by("index")]
    latest = Checkpoint.objects.get(epoch=3)
    assert merkle.root_of_leaves(leaves) == bytes(latest.root)
