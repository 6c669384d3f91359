"""Publishing epochs: the top log's leaves, heads and checkpoint (transparency.md §3.3).

Publication is one transaction under the log state's row lock: an epoch's leaves, heads and
checkpoint become visible together or not at all, and a crash mid-run publishes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.transparency.bulk import org_logs_published, top_nodes_insert
from apps.transparency.errors import OriginChanged
from apps.transparency.models import Checkpoint, LogState, OrgLog, TopLeaf
from apps.transparency.services.scope import every_org
from apps.transparency.services.trees import org_trees_extend
from apps.transparency.storage import top_node_reader
from apps.transparency.tree.merkle import append_hashes, frontier_nodes, leaf_hash, root_of_frontier
from apps.transparency.tree.note import checkpoint_body, is_valid_origin, org_head_leaf

BULK_BATCH = 5_000


@dataclass(frozen=True)
class EpochResult:
    published: bool
    epoch: int | None
    size: int
    leaves: int
    root: bytes | None

    def as_dict(self) -> dict[str, object]:
        return {
            "published": self.published,
            "epoch": self.epoch,
            "size": self.size,
            "leaves": self.leaves,
            "root": self.root.hex() if self.root is not None else None,
        }


def _latest(checkpoint: Checkpoint | None) -> EpochResult:
    if checkpoint is None:
        return EpochResult(published=False, epoch=None, size=0, leaves=0, root=None)
    return EpochResult(
        published=False,
        epoch=checkpoint.epoch,
        size=checkpoint.size,
        leaves=0,
        root=bytes(checkpoint.root),
    )


def transparency_publish_epoch(*, now: datetime | None = None) -> EpochResult:
    """One epoch run (§3.3): extend the org trees, then, if any org grew past its last
    published head, append one head per such org (ascending ``org_id``) to the top log and
    store checkpoint ``e``. Idempotent: a run with nothing new publishes nothing."""
    origin = settings.TRANSPARENCY_ORIGIN
    if not is_valid_origin(origin):
        raise OriginChanged(f"TRANSPARENCY_ORIGIN {origin!r} is not a valid origin")
    with every_org():
        org_trees_extend()
        with transaction.atomic():
            LogState.objects.bulk_create([LogState(pk=1)], ignore_conflicts=True)
            state = LogState.objects.select_for_update().get(pk=1)
            if state.origin and state.origin != origin:
                raise OriginChanged(
                    f"TRANSPARENCY_ORIGIN {origin!r} differs from the log's origin "
                    f"{state.origin!r}: publication refused"
                )
            last = Checkpoint.objects.order_by("-epoch").first()
            changed = sorted(
                OrgLog.objects.filter(tree_size__gt=F("published_size"), tree_size__gte=1)
                .values_list("log_id", "org_id", "tree_size", "tree_root")
                .iterator(),
                key=lambda row: row[0].encode("utf-8"),
            )
            if not changed:
                return _latest(last)
            epoch = (last.epoch if last else 0) + 1
            start = last.size if last else 0
            leaves = [org_head_leaf(log_id, size, bytes(root)) for log_id, _, size, root in changed]
            frontier = top_node_reader()(set(frontier_nodes(start)))
            created, edge, size = append_hashes(
                start, frontier, [leaf_hash(leaf) for leaf in leaves]
            )
            TopLeaf.objects.bulk_create(
                [
                    TopLeaf(
                        index=start + offset,
                        epoch=epoch,
                        log_id=log_id,
                        org_id=org_pk,
                        org_tree_size=tree_size,
                        org_root=bytes(root),
                        leaf=leaf,
                    )
                    for offset, ((log_id, org_pk, tree_size, root), leaf) in enumerate(
                        zip(changed, leaves, strict=True)
                    )
                ],
                batch_size=BULK_BATCH,
            )
            top_nodes_insert(created)
            org_logs_published([(org_pk, tree_size) for _, org_pk, tree_size, _ in changed])
            root = root_of_frontier(edge)
            Checkpoint.objects.create(
                epoch=epoch,
                size=size,
                root=root,
                body=checkpoint_body(origin, size, root),
                published_at=now or timezone.now(),
            )
            if not state.origin:
                state.origin = origin
                state.save(update_fields=["origin"])
            return EpochResult(
                published=True, epoch=epoch, size=size, leaves=len(leaves), root=root
            )


def transparency_publish_every(*, seconds: float, runs: int | None = None) -> Iterator[EpochResult]:
    """Run an epoch every ``seconds`` (the periodic work a deploy schedules)."""
    done = 0
    while runs is None or done < runs:
        started = time.monotonic()
        yield transparency_publish_epoch()
        done += 1
        if runs is None or done < runs:
            time.sleep(max(0.0, seconds - (time.monotonic() - started)))
