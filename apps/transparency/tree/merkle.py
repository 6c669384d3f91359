"""RFC 6962 Merkle trees (transparency.md §2), over a store of perfect-subtree hashes.

A node ``(level, index)`` is the MTH of the leaves ``[index·2^level, (index+1)·2^level)``.
Every root and proof the log serves is a combination of at most ``2·⌈log2 n⌉`` such nodes:
:func:`inclusion_ranges` and :func:`consistency_ranges` say which ranges of leaves a proof
hashes, :func:`range_nodes` which stored nodes make up a range, and :func:`range_hash`
folds them, so a caller reads every node a proof needs in one query.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence

Node = tuple[int, int]  # (level, index)
Range = tuple[int, int]  # leaves [start, end)
NodeHashes = Mapping[Node, bytes]

EMPTY_ROOT = hashlib.sha256(b"").digest()
MAX_PROOF_HASHES = 64


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than ``size`` (size > 1)."""
    return 1 << ((size - 1).bit_length() - 1)


# -- in memory (reference; the stored tree must agree with it) ---------------------------


def root_of_hashes(hashes: Sequence[bytes]) -> bytes:
    """MTH of a list of leaf hashes."""
    if not hashes:
        return EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = _split(len(hashes))
    return node_hash(root_of_hashes(hashes[:k]), root_of_hashes(hashes[k:]))


def root_of_leaves(leaves: Sequence[bytes]) -> bytes:
    return root_of_hashes([leaf_hash(leaf) for leaf in leaves])


def inclusion_proof_of_hashes(index: int, hashes: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[0:n]) given the leaf hashes."""
    if not 0 <= index < len(hashes):
        raise ValueError("index out of range")
    return [root_of_hashes(hashes[a:b]) for a, b in inclusion_ranges(index, len(hashes))]


def consistency_proof_of_hashes(first: int, hashes: Sequence[bytes]) -> list[bytes]:
    """PROOF(first, D[0:n]) given the leaf hashes."""
    if not 1 <= first <= len(hashes):
        raise ValueError("first out of range")
    return [root_of_hashes(hashes[a:b]) for a, b in consistency_ranges(first, len(hashes))]


# -- which ranges a proof hashes ---------------------------------------------------------


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """The leaf ranges whose MTHs make PATH(index, D[0:size]), sibling first."""
    if not 0 <= index < size:
        raise ValueError("index out of range")
    ranges: list[Range] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
    ranges.reverse()
    return ranges


def consistency_ranges(first: int, size: int) -> list[Range]:
    """The leaf ranges whose MTHs make PROOF(first, D[0:size]), in RFC 6962 order."""
    if not 1 <= first <= size:
        raise ValueError("first out of range")
    ranges: list[Range] = []
    lo, hi, m, complete = 0, size, first, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def range_nodes(start: int, end: int) -> list[Node]:
    """The perfect subtrees covering leaves ``[start, end)``, left to right (largest first
    for the ranges RFC 6962 builds)."""
    nodes: list[Node] = []
    while start < end:
        level = (start & -start).bit_length() - 1 if start else (end - start).bit_length() - 1
        while start + (1 << level) > end:
            level -= 1
        nodes.append((level, start >> level))
        start += 1 << level
    return nodes


def range_hash(start: int, end: int, nodes: NodeHashes) -> bytes:
    """MTH of leaves ``[start, end)`` from stored nodes (a range RFC 6962 recursion builds:
    its perfect subtrees fold from the right). Raises KeyError for a missing node."""
    if start >= end:
        return EMPTY_ROOT
    hashes = [nodes[node] for node in range_nodes(start, end)]
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def nodes_for(ranges: Iterable[Range]) -> set[Node]:
    needed: set[Node] = set()
    for start, end in ranges:
        needed.update(range_nodes(start, end))
    return needed


NodeReader = Callable[[set[Node]], NodeHashes]


def root_from(size: int, read: NodeReader) -> bytes:
    return range_hash(0, size, read(set(range_nodes(0, size))))


def inclusion_proof_from(index: int, size: int, read: NodeReader) -> list[bytes]:
    ranges = inclusion_ranges(index, size)
    nodes = read(nodes_for(ranges))
    return [range_hash(a, b, nodes) for a, b in ranges]


def consistency_proof_from(first: int, second: int, read: NodeReader) -> list[bytes]:
    ranges = consistency_ranges(first, second)
    nodes = read(nodes_for(ranges))
    return [range_hash(a, b, nodes) for a, b in ranges]


# -- appending ---------------------------------------------------------------------------


def frontier_nodes(size: int) -> list[Node]:
    """The perfect subtrees of a tree of ``size`` leaves: what appending needs."""
    return range_nodes(0, size)


def append_hashes(
    size: int, frontier: NodeHashes, hashes: Iterable[bytes]
) -> tuple[list[tuple[int, int, bytes]], dict[int, bytes], int]:
    """Append leaf hashes to a tree of ``size`` leaves whose frontier nodes are given.

    Returns every node completed (``(level, index, hash)``, leaves included), the new
    frontier by level, and the new size.
    """
    edge: dict[int, bytes] = {
        level: frontier[(level, index)] for level, index in range_nodes(0, size)
    }
    created: list[tuple[int, int, bytes]] = []
    for value in hashes:
        level, index, current = 0, size, value
        created.append((0, index, current))
        while index & 1:
            current = node_hash(edge.pop(level), current)
            level, index = level + 1, index >> 1
            created.append((level, index, current))
        edge[level] = current
        size += 1
    return created, edge, size


def root_of_frontier(edge: Mapping[int, bytes]) -> bytes:
    """The root of the tree whose frontier, by level, is ``edge``."""
    if not edge:
        return EMPTY_ROOT
    levels = sorted(edge)
    result = edge[levels[0]]
    for level in levels[1:]:
        result = node_hash(edge[level], result)
    return result


# -- verification (RFC 9162 §2.1.3.2, §2.1.4.2) -------------------------------------------


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """§2.3: whether ``proof`` takes leaf hash ``leaf`` at ``index`` to ``root``."""
    if not 0 <= index < size or len(proof) > MAX_PROOF_HASHES:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> bool:
    """§2.4: whether ``proof`` shows the tree of ``second`` extends the one of ``first``."""
    if not 1 <= first <= second or len(proof) > MAX_PROOF_HASHES:
        return False
    if first == second:
        return not proof and first_root == second_root
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == first_root and sr == second_root and sn == 0
