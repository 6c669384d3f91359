"""Properties of the tree code for random sizes: every proof verifies, every mutation fails."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.transparency.tree import merkle


def leaf_hashes(size: int) -> list[bytes]:
    return [merkle.leaf_hash(hashlib.sha256(b"leaf %d" % i).digest()) for i in range(size)]


def flip(value: bytes, bit: int) -> bytes:
    data = bytearray(value)
    data[bit // 8 % len(data)] ^= 1 << (bit % 8)
    return bytes(data)


sizes = st.integers(min_value=1, max_value=300)


@settings(max_examples=200, deadline=None)
@given(size=sizes, data=st.data())
def test_every_inclusion_proof_verifies_and_matches_the_stored_tree(
    size: int, data: st.DataObject
) -> None:
    hashes = leaf_hashes(size)
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    root = merkle.root_of_hashes(hashes)
    proof = merkle.inclusion_proof_of_hashes(index, hashes)
    assert merkle.verify_inclusion(hashes[index], index, size, proof, root)
    created, edge, _ = merkle.append_hashes(0, {}, hashes)
    nodes = {(level, i): value for level, i, value in created}
    assert merkle.root_of_frontier(edge) == root
    assert (
        merkle.inclusion_proof_from(index, size, lambda needed: {n: nodes[n] for n in needed})
        == proof
    )


@settings(max_examples=200, deadline=None)
@given(size=sizes, data=st.data())
def test_every_mutated_inclusion_proof_fails(size: int, data: st.DataObject) -> None:
    hashes = leaf_hashes(size)
    index = data.draw(st.integers(min_value=0, max_value=size - 1))
    root = merkle.root_of_hashes(hashes)
    proof = merkle.inclusion_proof_of_hashes(index, hashes)
    mutation = data.draw(st.sampled_from(["hash", "leaf", "root", "index", "size", "drop", "add"]))
    bit = data.draw(st.integers(min_value=0, max_value=255))
    leaf, at, n = hashes[index], index, size
    if mutation == "hash" and proof:
        k = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        proof[k] = flip(proof[k], bit)
    elif mutation == "leaf":
        leaf = flip(leaf, bit)
    elif mutation == "root":
        root = flip(root, bit)
    elif mutation == "index":
        at = data.draw(st.integers(min_value=0, max_value=size).filter(lambda v: v != index))
    elif mutation == "drop" and proof:
        proof.pop(data.draw(st.integers(min_value=0, max_value=len(proof) - 1)))
    elif mutation == "add":
        proof.append(hashlib.sha256(b"extra").digest())
    elif mutation == "size":
        # A path does not bind the size by itself (§2.3): only sizes that change its shape
        # must fail; check that any size that verifies yields the same root's tree shape.
        n = data.draw(st.integers(min_value=1, max_value=400).filter(lambda v: v != size))
        if merkle.verify_inclusion(leaf, at, n, proof, root):
            assert len(merkle.inclusion_ranges(index, n)) == len(proof)
            return
    else:
        return  # nothing to mutate (size 1 has an empty path)
    assert not merkle.verify_inclusion(leaf, at, n, proof, root)


@settings(max_examples=200, deadline=None)
@given(second=sizes, data=st.data())
def test_every_consistency_proof_verifies_and_matches_the_stored_tree(
    second: int, data: st.DataObject
) -> None:
    hashes = leaf_hashes(second)
    first = data.draw(st.integers(min_value=1, max_value=second))
    proof = merkle.consistency_proof_of_hashes(first, hashes)
    first_root, second_root = merkle.root_of_hashes(hashes[:first]), merkle.root_of_hashes(hashes)
    assert merkle.verify_consistency(first, second, first_root, second_root, proof)
    created, _, _ = merkle.append_hashes(0, {}, hashes)
    nodes = {(level, i): value for level, i, value in created}
    assert (
        merkle.consistency_proof_from(first, second, lambda needed: {n: nodes[n] for n in needed})
        == proof
    )


@settings(max_examples=200, deadline=None)
@given(second=st.integers(min_value=2, max_value=300), data=st.data())
def test_every_mutated_consistency_proof_fails(second: int, data: st.DataObject) -> None:
    hashes = leaf_hashes(second)
    first = data.draw(st.integers(min_value=1, max_value=second - 1))
    proof = merkle.consistency_proof_of_hashes(first, hashes)
    first_root, second_root = merkle.root_of_hashes(hashes[:first]), merkle.root_of_hashes(hashes)
    mutation = data.draw(
        st.sampled_from(["hash", "first_root", "second_root", "first", "drop", "add"])
    )
    bit = data.draw(st.integers(min_value=0, max_value=255))
    m = first
    if mutation == "hash":
        k = data.draw(st.integers(min_value=0, max_value=len(proof) - 1))
        proof[k] = flip(proof[k], bit)
    elif mutation == "first_root":
        first_root = flip(first_root, bit)
    elif mutation == "second_root":
        second_root = flip(second_root, bit)
    elif mutation == "first":
        m = data.draw(st.integers(min_value=1, max_value=second).filter(lambda v: v != first))
        # Another first size verifies only if it really is that tree's root and proof.
        if merkle.verify_consistency(m, second, first_root, second_root, proof):
            assert first_root == merkle.root_of_hashes(hashes[:m])
            return
    elif mutation == "drop":
        proof.pop(data.draw(st.integers(min_value=0, max_value=len(proof) - 1)))
    else:
        proof.append(hashlib.sha256(b"extra").digest())
    assert not merkle.verify_consistency(m, second, first_root, second_root, proof)


@settings(max_examples=100, deadline=None)
@given(first=st.integers(min_value=0, max_value=200), more=st.integers(min_value=1, max_value=200))
def test_appending_in_two_steps_stores_what_appending_at_once_does(first: int, more: int) -> None:
    hashes = leaf_hashes(first + more)
    created, edge, size = merkle.append_hashes(0, {}, hashes[:first])
    nodes = {(level, i): value for level, i, value in created}
    frontier = {node: nodes[node] for node in merkle.frontier_nodes(first)}
    later, edge, size = merkle.append_hashes(first, frontier, hashes[first:])
    nodes.update({(level, i): value for level, i, value in later})
    at_once, _, _ = merkle.append_hashes(0, {}, hashes)
    assert nodes == {(level, i): value for level, i, value in at_once}
    assert size == first + more
    assert merkle.root_of_frontier(edge) == merkle.root_of_hashes(hashes)
