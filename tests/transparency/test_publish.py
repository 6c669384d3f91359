"""Epoch publication (transparency.md §3.3) against the publish_epochs vector, and its rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import override_settings

from apps.tenancy.models import Plan
from apps.tenancy.services import org_create
from apps.transparency.errors import OriginChanged
from apps.transparency.models import Checkpoint, LogState, OrgLog, OrgTreeNode, TopLeaf
from apps.transparency.services import org_trees_extend, transparency_publish_epoch
from apps.transparency.tree import merkle
from tests.transparency.factories import mirror, set_log_id

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "vectors" / "transparency.json").read_text()
)
CASE = next(case for case in VECTORS["cases"] if case["op"] == "publish_epochs")

pytestmark = pytest.mark.django_db


@override_settings(TRANSPARENCY_ORIGIN=CASE["inputs"]["origin"])
def test_epochs_reproduce_the_vector_byte_for_byte() -> None:
    inputs = CASE["inputs"]
    orgs = {}
    for n, log_id in enumerate(inputs["org_trees"]):
        orgs[log_id] = org_create(slug=f"org{n}", name=f"Org {n}", plan=Plan.PRO)
        set_log_id(orgs[log_id], log_id)
    mirrored = dict.fromkeys(orgs, 0)
    for snapshot, expected in zip(inputs["snapshots"], CASE["expected"]["epochs"], strict=True):
        for log_id, size in snapshot.items():
            mirror(orgs[log_id], inputs["org_trees"][log_id][mirrored[log_id] : size])
            mirrored[log_id] = size
        result = transparency_publish_epoch()
        if expected is None:
            assert result.published is False
            continue
        assert result.published
        assert result.epoch == expected["epoch"]
        checkpoint = Checkpoint.objects.get(epoch=expected["epoch"])
        assert checkpoint.body == expected["checkpoint_body"]
        leaves = TopLeaf.objects.filter(epoch=expected["epoch"]).order_by("index")
        assert [
            {
                "index": leaf.index,
                "epoch": leaf.epoch,
                "org_id": leaf.log_id,
                "org_tree_size": leaf.org_tree_size,
                "org_root": bytes(leaf.org_root).hex(),
                "leaf_hex": bytes(leaf.leaf).hex(),
            }
            for leaf in leaves
        ] == expected["leaves"]


def test_a_run_with_nothing_new_uses_no_epoch_number(cast) -> None:
    assert transparency_publish_epoch().as_dict() == {
        "published": False,
        "epoch": None,
        "size": 0,
        "leaves": 0,
        "root": None,
    }
    mirror(cast.acme, ["ab" * 32])
    first = transparency_publish_epoch()
    assert (first.published, first.epoch, first.size, first.leaves) == (True, 1, 1, 1)
    again = transparency_publish_epoch()
    assert (again.published, again.epoch, again.size, again.leaves) == (False, 1, 1, 0)
    assert again.root == first.root
    mirror(cast.globex, ["cd" * 32])
    assert transparency_publish_epoch().epoch == 2
    assert list(Checkpoint.objects.values_list("epoch", flat=True)) == [2, 1]


def test_stored_trees_agree_with_the_reference_at_every_size(cast) -> None:
    hashes = [merkle.leaf_hash(bytes([n]) * 32) for n in range(37)]
    for chunk in ([0, 5], [5, 6], [6, 16], [16, 37]):
        mirror(cast.acme, [(bytes([n]) * 32).hex() for n in range(*chunk)])
        org_trees_extend()
        log = OrgLog.objects.get(org=cast.acme)
        assert log.tree_size == chunk[1]
        assert bytes(log.tree_root) == merkle.root_of_hashes(hashes[: chunk[1]])
    # Every perfect subtree once: 37 leaves store 37 + 18 + 9 + 4 + 2 + 1 nodes.
    assert OrgTreeNode.objects.filter(org=cast.acme).count() == 37 + 18 + 9 + 4 + 2 + 1


def test_publication_refuses_another_origin_than_epoch_ones(cast) -> None:
    mirror(cast.acme, ["ab" * 32])
    transparency_publish_epoch()
    assert LogState.objects.get().origin == "localhost/v1/log"
    mirror(cast.acme, ["cd" * 32])
    with (
        override_settings(TRANSPARENCY_ORIGIN="other.example/v1/log"),
        pytest.raises(OriginChanged),
    ):
        transparency_publish_epoch()
    assert Checkpoint.objects.count() == 1


def test_a_new_org_gets_an_opaque_log_id(cast) -> None:
    log_id = OrgLog.objects.get(org=cast.acme).log_id
    assert log_id.startswith("olog_")
    assert len(log_id) == 31
    assert "acme" not in log_id
    assert OrgLog.objects.get(org=cast.globex).log_id != log_id


def test_extension_in_small_chunks_and_batches_stores_the_same_trees(cast, monkeypatch) -> None:
    from apps.transparency.services import trees

    monkeypatch.setattr(trees, "EXTEND_CHUNK", 3)
    monkeypatch.setattr(trees, "ORGS_PER_BATCH", 1)
    acme = [(bytes([n]) * 32).hex() for n in range(11)]
    globex = [(bytes([100 + n]) * 32).hex() for n in range(4)]
    mirror(cast.acme, acme)
    mirror(cast.globex, globex)
    assert org_trees_extend() == 15
    for org, hashes in ((cast.acme, acme), (cast.globex, globex)):
        log = OrgLog.objects.get(org=org)
        assert log.tree_size == len(hashes)
        assert bytes(log.tree_root) == merkle.root_of_leaves([bytes.fromhex(h) for h in hashes])
    assert org_trees_extend() == 0
