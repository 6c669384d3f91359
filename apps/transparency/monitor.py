"""The monitor's logic (transparency.md §8), over the public routes only.

State (a JSON file): the last verified checkpoint's size and root, the top tree's frontier
(so new leaves are checked against the new root without refetching old ones), and every
org's last head. Every violation is reported; the state moves only when all checks pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apps.transparency.client import LogClient, LogUnavailable
from apps.transparency.state_file import state_load, state_store
from apps.transparency.tree.merkle import (
    append_hashes,
    frontier_nodes,
    leaf_hash,
    root_of_frontier,
    verify_consistency,
)
from apps.transparency.tree.note import ORG_ID_RE, NoteError, org_head_leaf, parse_checkpoint


@dataclass
class MonitorReport:
    size: int
    new_leaves: int = 0
    alerts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"size": self.size, "new_leaves": self.new_leaves, "alerts": self.alerts}


def monitor_step(*, client: LogClient, origin: str, state_file: Path) -> MonitorReport:
    """Check the log's newest checkpoint against what was verified before (§8)."""
    state = state_load(state_file, {"size": 0, "root": None, "frontier": {}, "orgs": {}})
    old_size = int(state["size"])
    report = MonitorReport(size=old_size)
    try:
        note = client.checkpoint()
    except LogUnavailable as error:
        report.alerts.append(f"checkpoint unavailable: {error}")
        return report
    if note is None:
        if old_size:
            report.alerts.append("rollback: the log serves no checkpoint any more")
        return report
    try:
        checkpoint = parse_checkpoint(note)
    except NoteError as error:
        report.alerts.append(f"bad checkpoint: {error}")
        return report
    if checkpoint.origin != origin:
        report.alerts.append(f"wrong origin {checkpoint.origin!r}")
        return report
    size, root = checkpoint.size, checkpoint.root
    report.size = size
    if size < old_size:
        report.alerts.append(f"rollback: size {size} after {old_size}")
        return report
    old_root = bytes.fromhex(state["root"]) if state["root"] else None
    if size == old_size:
        if old_root is not None and root != old_root:
            report.alerts.append(f"fork: another root at size {size}")
        return report
    try:
        if old_size and old_root is not None:
            proof = client.consistency(old_size, size)
            if not verify_consistency(old_size, size, old_root, root, proof):
                report.alerts.append(f"top log inconsistent: {old_size} -> {size}")
        leaves = client.leaves(old_size, size)
    except (LogUnavailable, KeyError, ValueError) as error:
        report.alerts.append(f"log routes failed: {error}")
        return report
    report.new_leaves = len(leaves)
    if [leaf.get("index") for leaf in leaves] != list(range(old_size, size)):
        report.alerts.append("the leaves route skipped or repeated an index")
        return report
    frontier = {
        (level, index): bytes.fromhex(state["frontier"][str(level)])
        for level, index in frontier_nodes(old_size)
    }
    hashes: list[bytes] = []
    orgs: dict[str, list[Any]] = state["orgs"]
    by_epoch: dict[int, list[str]] = {}
    for leaf in leaves:
        org_id, org_size, org_root = leaf["org_id"], leaf["org_tree_size"], leaf["org_root"]
        if not isinstance(org_id, str) or not ORG_ID_RE.match(org_id):
            report.alerts.append(f"leaf {leaf['index']}: bad org_id")
            continue
        hashes.append(leaf_hash(org_head_leaf(org_id, org_size, bytes.fromhex(org_root))))
        by_epoch.setdefault(leaf["epoch"], []).append(org_id)
        previous = orgs.get(org_id)
        if previous is not None:
            previous_size, previous_root = previous
            if org_size <= previous_size:
                report.alerts.append(f"{org_id}: head size {org_size} after {previous_size}")
            else:
                try:
                    answer = client.org_consistency(org_id, previous_size, org_size)
                    proof = [bytes.fromhex(value) for value in answer["proof"]]
                except (LogUnavailable, KeyError, ValueError) as error:
                    report.alerts.append(f"{org_id}: no org consistency proof: {error}")
                else:
                    if (
                        answer.get("first_root") != previous_root
                        or answer.get("second_root") != org_root
                        or not verify_consistency(
                            previous_size,
                            org_size,
                            bytes.fromhex(previous_root),
                            bytes.fromhex(org_root),
                            proof,
                        )
                    ):
                        report.alerts.append(
                            f"{org_id}: head {org_size} is not consistent with {previous_size}"
                        )
        orgs[org_id] = [org_size, org_root]
    for epoch, org_ids in by_epoch.items():
        encoded = [org_id.encode() for org_id in org_ids]
        if encoded != sorted(set(encoded)):
            report.alerts.append(f"epoch {epoch}: leaves not one per org in org_id order")
    _, edge, _ = append_hashes(old_size, frontier, hashes)
    if root_of_frontier(edge) != root:
        report.alerts.append("the leaves do not reproduce the checkpoint's root")
    if report.alerts:
        return report
    state.update(
        size=size,
        root=root.hex(),
        frontier={str(level): value.hex() for level, value in edge.items()},
        orgs=orgs,
    )
    state_store(state_file, state)
    return report
