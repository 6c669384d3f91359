"""Reads of the transparency log: checkpoints, proofs, leaves, tiles (transparency.md §5-§6).

Published rows never change, so reading the latest checkpoint first and then only rows it
covers (top leaves below its size, nodes of sizes it published) is one consistent view.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Subquery
from django.utils import timezone

from apps.common.errors import InvalidInput
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import Org
from apps.tenancy.org_context import activate_orgs
from apps.transparency.errors import (
    CheckpointNotFound,
    OrgHeadNotFound,
    ProofPending,
    ReceiptNotFound,
    TileNotFound,
)
from apps.transparency.models import Checkpoint, Cosignature, OrgLog, TopLeaf, TopNode, Witness
from apps.transparency.storage import org_node_reader, top_node_reader
from apps.transparency.tree.merkle import (
    Node,
    NodeHashes,
    consistency_proof_from,
    inclusion_proof_from,
)
from apps.transparency.tree.note import checkpoint_note, is_hex64
from apps.transparency.tree.tiles import TILE_WIDTH, TileRef, entry_bundle, tile_served

MAX_LEAVES = 1000
MAX_BIGINT = 2**63 - 1


def latest_checkpoint() -> Checkpoint | None:
    return Checkpoint.objects.order_by("-epoch").first()


def _cosignatures(checkpoint: Checkpoint) -> list[Cosignature]:
    rows = list(Cosignature.objects.filter(checkpoint=checkpoint).select_related("witness"))
    rows.sort(key=lambda row: (row.witness.name.encode("utf-8"), row.witness.key_id))
    return rows


def served_note(checkpoint: Checkpoint) -> str:
    """§4.2: the body and one line per accepted cosignature, by witness name then key ID."""
    return checkpoint_note(checkpoint.body, [row.line for row in _cosignatures(checkpoint)])


def latest_note() -> str:
    checkpoint = latest_checkpoint()
    if checkpoint is None:
        raise CheckpointNotFound("no checkpoint has been published yet")
    return served_note(checkpoint)


@dataclass(frozen=True)
class CheckpointView:
    checkpoint: Checkpoint
    note: str
    cosignatures: list[Cosignature]


def checkpoint_view(checkpoint: Checkpoint) -> CheckpointView:
    rows = _cosignatures(checkpoint)
    return CheckpointView(
        checkpoint=checkpoint,
        note=checkpoint_note(checkpoint.body, [row.line for row in rows]),
        cosignatures=rows,
    )


def retry_after_seconds(checkpoint: Checkpoint | None, now: datetime | None = None) -> int:
    """Until the next epoch is due; 60 when periodic publication is off."""
    every = settings.TRANSPARENCY_EPOCH_SECONDS
    if every <= 0:
        return 60
    if checkpoint is None:
        return max(1, every)
    due = checkpoint.published_at.timestamp() + every - (now or timezone.now()).timestamp()
    return max(1, math.ceil(due))


def receipt_proof(*, org: Org, action_hash: str) -> dict[str, Any]:
    """§5.1: the proof object of the org's entry ``action_hash`` against the latest
    checkpoint. ReceiptNotFound for anything not an entry of ``org``; ProofPending while no
    published head of the org covers it."""
    if not is_hex64(action_hash):
        raise ReceiptNotFound("no such receipt")
    seq = (
        MirrorEntry.objects.filter(org=org, action_hash=action_hash)
        .values_list("seq", flat=True)
        .first()
    )
    if seq is None:
        raise ReceiptNotFound("no such receipt")
    return _ProofBase.latest(org).proof(seq)


@dataclass
class _ProofBase:
    """What every proof of an org against one checkpoint shares: the checkpoint, the org's
    head in it, and readers of the nodes (the org's remembered across proofs, so a run of
    neighbouring receipts reads each shared node once)."""

    org: Org
    checkpoint: Checkpoint | None
    head: TopLeaf | None
    parts: dict[str, Any] | None = None
    known: dict[Node, bytes] = field(default_factory=dict)

    @classmethod
    def latest(cls, org: Org) -> _ProofBase:
        checkpoint = latest_checkpoint()
        head = None
        if checkpoint is not None:
            heads = TopLeaf.objects.filter(org=org, index__lt=checkpoint.size)
            head = heads.order_by("-index").first()
        return cls(org=org, checkpoint=checkpoint, head=head)

    def covers(self, seq: int) -> bool:
        return self.head is not None and self.head.org_tree_size >= seq

    def proof(self, seq: int) -> dict[str, Any]:
        checkpoint, head = self.checkpoint, self.head
        if checkpoint is None or head is None or head.org_tree_size < seq:
            raise ProofPending(
                "this receipt is not yet in a checkpoint",
                retry_after=retry_after_seconds(checkpoint),
            )
        shared = self._shared(checkpoint, head)
        inclusion = inclusion_proof_from(seq - 1, head.org_tree_size, self._org_nodes)
        proof: dict[str, Any] = {
            "log_id": shared["log_id"],
            "leaf_index": seq - 1,
            "inclusion_proof": [value.hex() for value in inclusion],
            "org_root": bytes(head.org_root).hex(),
            "org_tree_size": head.org_tree_size,
            "epoch": checkpoint.epoch,
            "org_id": head.log_id,
            "top_leaf_index": head.index,
            "checkpoint": shared["note"],
        }
        if shared["top"]:
            proof["top_inclusion_proof"] = shared["top"]
        if shared["cosignatures"]:
            proof["cosignatures"] = shared["cosignatures"]
        return proof

    def _shared(self, checkpoint: Checkpoint, head: TopLeaf) -> dict[str, Any]:
        if self.parts is None:
            view = checkpoint_view(checkpoint)
            top = inclusion_proof_from(head.index, checkpoint.size, top_node_reader())
            self.parts = {
                "log_id": checkpoint.body.split("\n", 1)[0],
                "note": view.note,
                "top": [value.hex() for value in top],
                "cosignatures": [
                    {"witness_key": row.witness.vkey, "signature": row.line.split(" ", 2)[2]}
                    for row in view.cosignatures
                ],
            }
        return self.parts

    def _org_nodes(self, needed: set[Node]) -> NodeHashes:
        missing = needed - set(self.known)
        if missing:
            if len(self.known) > PROOF_NODE_CACHE:
                self.known.clear()
            self.known.update(org_node_reader(self.org.pk)(missing))
        return {node: self.known[node] for node in needed}


# Org tree nodes a run of proofs remembers (a few MB at most).
PROOF_NODE_CACHE = 100_000


def receipt_proofs(
    *, org: Org, entries: Iterable[tuple[int, str]]
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """The proof object (§5.1) of each ``(seq, action_hash)`` of ``org``, all against the
    latest checkpoint: ``(seq, action_hash, proof)``. ProofPending at the first entry no
    published head of the org covers yet. For an archive of many receipts: the checkpoint
    and the org's head are read once, and each tree node once per run."""
    base = _ProofBase.latest(org)
    for seq, action_hash in entries:
        yield seq, action_hash, base.proof(seq)


def receipt_proofs_covered(*, org: Org, last_seq: int) -> bool:
    """Whether the latest checkpoint covers the org's entries up to ``last_seq``."""
    return _ProofBase.latest(org).covers(last_seq)


@dataclass(frozen=True)
class InclusionStatus:
    """For the console: whether an entry is covered, and by which epoch."""

    covered: bool
    epoch: int | None
    org_tree_size: int | None


def entry_inclusion_status(*, org_pk: int, seq: int) -> InclusionStatus:
    """The first published head of the org that covers entry ``seq``. An org's heads grow
    with its index, so the smallest covering tree size is the first such head; read by the
    (log_id, org_tree_size) key, it is one index lookup however many heads the org has (by
    the org and index, it was a walk through every head published before it)."""
    log_id = OrgLog.objects.filter(org_id=org_pk).values("log_id")
    head = (
        TopLeaf.objects.filter(log_id=Subquery(log_id), org_tree_size__gte=seq)
        .order_by("org_tree_size")
        .values_list("epoch", "org_tree_size")
        .first()
    )
    if head is None:
        return InclusionStatus(covered=False, epoch=None, org_tree_size=None)
    return InclusionStatus(covered=True, epoch=head[0], org_tree_size=head[1])


def top_consistency(*, first: int, second: int) -> list[bytes]:
    checkpoint = latest_checkpoint()
    size = checkpoint.size if checkpoint else 0
    if not 1 <= first <= second <= size:
        raise InvalidInput(f"need 1 <= first <= second <= {size}")
    return consistency_proof_from(first, second, top_node_reader())


@dataclass(frozen=True)
class OrgConsistency:
    org_id: str
    first: int
    second: int
    first_root: bytes
    second_root: bytes
    proof: list[bytes]


def org_consistency(*, org_id: str, first: int, second: int) -> OrgConsistency:
    """§5.4: between two published heads of an org (public: hashes and sizes only)."""
    if not 1 <= first <= second:
        raise InvalidInput("need 1 <= first <= second")
    if second > MAX_BIGINT:
        raise OrgHeadNotFound(f"no published head of {org_id} with those sizes")
    checkpoint = latest_checkpoint()
    limit = checkpoint.size if checkpoint else 0
    heads = {
        size: (org_pk, bytes(root))
        for size, org_pk, root in TopLeaf.objects.filter(
            log_id=org_id, org_tree_size__in=[first, second], index__lt=limit
        ).values_list("org_tree_size", "org_id", "org_root")
    }
    if first not in heads or second not in heads:
        raise OrgHeadNotFound(f"no published head of {org_id} with those sizes")
    org_pk = heads[second][0]
    if org_pk is None:
        raise OrgHeadNotFound(f"the org {org_id} is gone")
    # A public request reads this one org's nodes, nothing else.
    activate_orgs([org_pk])
    proof = consistency_proof_from(first, second, org_node_reader(org_pk))
    return OrgConsistency(
        org_id=org_id,
        first=first,
        second=second,
        first_root=heads[first][1],
        second_root=heads[second][1],
        proof=proof,
    )


def top_leaves(*, start: int, end: int) -> tuple[int, list[dict[str, Any]]]:
    checkpoint = latest_checkpoint()
    size = checkpoint.size if checkpoint else 0
    if not 0 <= start < end or start >= size:
        raise InvalidInput(f"need 0 <= start < end and start < {size}")
    stop = min(end, start + MAX_LEAVES, size)
    rows = TopLeaf.objects.filter(index__gte=start, index__lt=stop).order_by("index")
    leaves = [
        {
            "index": row.index,
            "epoch": row.epoch,
            "org_id": row.log_id,
            "org_tree_size": row.org_tree_size,
            "org_root": bytes(row.org_root).hex(),
        }
        for row in rows
    ]
    return stop, leaves


def tile_bytes(ref: TileRef) -> bytes:
    """§6: a hash tile or an entry bundle, only when the latest checkpoint covers it."""
    checkpoint = latest_checkpoint()
    size = checkpoint.size if checkpoint else 0
    if not tile_served(ref.level or 0, ref.index, ref.width, size):
        raise TileNotFound("no such tile in the latest checkpoint")
    first = ref.index * TILE_WIDTH
    if ref.level is None:
        rows = TopLeaf.objects.filter(index__gte=first, index__lt=first + ref.width).order_by(
            "index"
        )
        return entry_bundle(bytes(row.leaf) for row in rows)
    level = 8 * ref.level
    hashes = dict(
        TopNode.objects.filter(
            level=level, index__gte=first, index__lt=first + ref.width
        ).values_list("index", "hash")
    )
    return b"".join(bytes(hashes[first + j]) for j in range(ref.width))


def witness_list() -> list[Witness]:
    witnesses = list(Witness.objects.all())
    witnesses.sort(key=lambda row: (row.name.encode("utf-8"), row.key_id))
    return witnesses
