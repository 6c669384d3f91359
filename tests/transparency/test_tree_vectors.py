"""The pure tree code against shared/vectors/transparency.json, byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from apps.transparency.tree import merkle, note, tiles
from apps.transparency.tree.proof import verify_proof

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "vectors" / "transparency.json").read_text()
)
LEAF_SETS = {
    name: [bytes.fromhex(leaf) for leaf in leaves] for name, leaves in VECTORS["leaf_sets"].items()
}


def cases(op: str) -> list[Any]:
    return [pytest.param(case, id=case["name"]) for case in VECTORS["cases"] if case["op"] == op]


def stored(leaves: list[bytes]) -> merkle.NodeReader:
    """A node store built by appending, as the database tables are."""
    created, _, _ = merkle.append_hashes(0, {}, [merkle.leaf_hash(leaf) for leaf in leaves])
    nodes = {(level, index): value for level, index, value in created}

    def read(needed: set[merkle.Node]) -> merkle.NodeHashes:
        return {node: nodes[node] for node in needed}

    return read


def test_every_op_of_the_vectors_is_covered() -> None:
    tested = {
        "tree_roots",
        "tree_root",
        "inclusion_proof",
        "consistency_proof",
        "verify_inclusion",
        "verify_consistency",
        "org_head_leaf",
        "checkpoint_body",
        "checkpoint_note",
        "cosign",
        "verify_cosignature",
        "tile_path",
        "tile",
        "entry_bundle",
        "publish_epochs",
        "verify_proof",
    }
    assert {case["op"] for case in VECTORS["cases"]} <= tested


@pytest.mark.parametrize("case", cases("tree_roots"))
def test_tree_roots(case: dict[str, Any]) -> None:
    leaves = LEAF_SETS[case["inputs"]["leaf_set"]]
    read = stored(leaves)
    for size, expected in enumerate(case["expected"]["roots"]):
        assert merkle.root_of_leaves(leaves[:size]).hex() == expected
        if size:
            assert merkle.root_from(size, read).hex() == expected


@pytest.mark.parametrize("case", cases("tree_root"))
def test_tree_root(case: dict[str, Any]) -> None:
    leaves = [bytes.fromhex(leaf) for leaf in case["inputs"]["leaves_hex"]]
    assert merkle.root_of_leaves(leaves).hex() == case["expected"]["root"]


@pytest.mark.parametrize("case", cases("inclusion_proof"))
def test_inclusion_proof(case: dict[str, Any]) -> None:
    inputs, expected = case["inputs"], case["expected"]
    leaves = LEAF_SETS[inputs["leaf_set"]][: inputs["size"]]
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    in_memory = merkle.inclusion_proof_of_hashes(inputs["index"], hashes)
    from_store = merkle.inclusion_proof_from(inputs["index"], inputs["size"], stored(leaves))
    assert [p.hex() for p in in_memory] == expected["proof"]
    assert [p.hex() for p in from_store] == expected["proof"]
    assert merkle.root_of_hashes(hashes).hex() == expected["root"]
    assert hashes[inputs["index"]].hex() == expected["leaf_hash"]


@pytest.mark.parametrize("case", cases("consistency_proof"))
def test_consistency_proof(case: dict[str, Any]) -> None:
    inputs, expected = case["inputs"], case["expected"]
    leaves = LEAF_SETS[inputs["leaf_set"]][: inputs["second"]]
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    in_memory = merkle.consistency_proof_of_hashes(inputs["first"], hashes)
    from_store = merkle.consistency_proof_from(inputs["first"], inputs["second"], stored(leaves))
    assert [p.hex() for p in in_memory] == expected["proof"]
    assert [p.hex() for p in from_store] == expected["proof"]
    assert merkle.root_of_hashes(hashes[: inputs["first"]]).hex() == expected["first_root"]
    assert merkle.root_of_hashes(hashes).hex() == expected["second_root"]


def _hashes(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(value) for value in values]


@pytest.mark.parametrize("case", cases("verify_inclusion"))
def test_verify_inclusion(case: dict[str, Any]) -> None:
    i = case["inputs"]
    valid = merkle.verify_inclusion(
        bytes.fromhex(i["leaf_hash"]),
        i["index"],
        i["size"],
        _hashes(i["proof"]),
        bytes.fromhex(i["root"]),
    )
    assert valid is case["expected"]["valid"]


@pytest.mark.parametrize("case", cases("verify_consistency"))
def test_verify_consistency(case: dict[str, Any]) -> None:
    i = case["inputs"]
    valid = merkle.verify_consistency(
        i["first"],
        i["second"],
        bytes.fromhex(i["first_root"]),
        bytes.fromhex(i["second_root"]),
        _hashes(i["proof"]),
    )
    assert valid is case["expected"]["valid"]


@pytest.mark.parametrize("case", cases("org_head_leaf"))
def test_org_head_leaf(case: dict[str, Any]) -> None:
    i = case["inputs"]
    leaf = note.org_head_leaf(i["org_id"], i["org_tree_size"], bytes.fromhex(i["org_root"]))
    assert leaf.hex() == case["expected"]["leaf_hex"]
    assert merkle.leaf_hash(leaf).hex() == case["expected"]["leaf_hash"]
    assert note.parse_org_head_leaf(leaf) == (
        i["org_id"],
        i["org_tree_size"],
        bytes.fromhex(i["org_root"]),
    )


@pytest.mark.parametrize("case", cases("checkpoint_body"))
def test_checkpoint_body(case: dict[str, Any]) -> None:
    i = case["inputs"]
    body = note.checkpoint_body(i["origin"], i["size"], bytes.fromhex(i["root"]))
    assert body == case["expected"]["body"]


@pytest.mark.parametrize("case", cases("checkpoint_note"))
def test_checkpoint_note(case: dict[str, Any]) -> None:
    i = case["inputs"]
    served = note.checkpoint_note(i["body"], i["signature_lines"])
    assert served == case["expected"]["note"]
    parsed = note.parse_checkpoint(served)
    assert parsed.body == i["body"]
    assert [line.text for line in parsed.lines] == i["signature_lines"]


@pytest.mark.parametrize("case", cases("cosign"))
def test_cosign(case: dict[str, Any]) -> None:
    i, expected = case["inputs"], case["expected"]
    seed = bytes.fromhex(i["seed_hex"])
    line = note.cosign(seed, i["name"], i["timestamp"], i["body"])
    assert line == expected["line"]
    key = note.parse_vkey(expected["vkey"])
    assert note.b64(key.public_key) == expected["public_key_b64"]
    assert key.key_id.hex() == expected["key_id_hex"]
    assert note.vkey_of(i["name"], key.public_key) == expected["vkey"]
    message = note.cosignature_message(i["body"], i["timestamp"])
    assert message.hex() == case["derived"]["message_hex"]
    assert note.verify_cosignature_line(expected["vkey"], i["body"], line)


@pytest.mark.parametrize("case", cases("verify_cosignature"))
def test_verify_cosignature(case: dict[str, Any]) -> None:
    i = case["inputs"]
    valid = note.verify_cosignature_line(i["vkey"], i["body"], i["line"])
    assert valid is case["expected"]["valid"]


@pytest.mark.parametrize("case", cases("tile_path"))
def test_tile_path(case: dict[str, Any]) -> None:
    i = case["inputs"]
    path = tiles.tile_path(i["level"], i["index"], i["width"])
    assert path == case["expected"]["path"]
    assert tiles.parse_tile_path(path.removeprefix("tile/")) == tiles.TileRef(
        level=i["level"], index=i["index"], width=i["width"]
    )


@pytest.mark.parametrize("case", cases("tile"))
def test_tile(case: dict[str, Any]) -> None:
    i, expected = case["inputs"], case["expected"]
    leaves = LEAF_SETS[i["leaf_set"]][: i["tree_size"]]
    served = tiles.tile_served(i["level"], i["index"], i["width"], i["tree_size"])
    assert served is expected["served"]
    if served:
        read = stored(leaves)
        level = 8 * i["level"]
        first = i["index"] * tiles.TILE_WIDTH
        nodes = read({(level, first + j) for j in range(i["width"])})
        tile = b"".join(nodes[(level, first + j)] for j in range(i["width"]))
        assert tile.hex() == expected["tile_hex"]


@pytest.mark.parametrize("case", cases("entry_bundle"))
def test_entry_bundle(case: dict[str, Any]) -> None:
    leaves = [bytes.fromhex(leaf) for leaf in case["inputs"]["leaves_hex"]]
    assert tiles.entry_bundle(leaves).hex() == case["expected"]["bundle_hex"]


@pytest.mark.parametrize("case", cases("verify_proof"))
def test_verify_proof(case: dict[str, Any]) -> None:
    i = case["inputs"]
    verdict = verify_proof(
        action_hash=i["action_hash"],
        proof=i["proof"],
        origin=i["origin"],
        witness_keys=i["witness_keys"],
        required_cosignatures=i["required_cosignatures"],
        org_id=i.get("org_id"),
    )
    assert verdict.valid is case["expected"]["valid"], verdict
    if not verdict.valid:
        assert verdict.reason == case["expected"]["reason"], verdict.detail


def test_vector_witness_seed_is_what_the_spec_says() -> None:
    assert hashlib.sha256(b"vector-witness-1").hexdigest().startswith("c432ccfb")
