"""The restore drill: is a restored database a mirror and a log that still verify?

A backup is only as good as its restore. After restoring (docs/production.md, "Backups"),
``manage.py restore_check`` recomputes every org's mirror chain, checks the transparency
log's stored checkpoints against each other, and checks the restored log against the
checkpoints that were published before the backup was taken (a checkpoint note saved beside
the dump, or one a witness or monitor holds). A restored log older than a checkpoint that was
already published is a rollback: reported as such, never passed silently, because witnesses
and monitors will see it too. The mirror entries lost by restoring to an earlier point are
not lost to the agents: their local ledgers are the source of truth, and their re-pushes
refill the mirror (same action hashes; already mirrored receipts answer ``duplicate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from apps.receipts.selectors import mirror_chain_check
from apps.tenancy.models import Org
from apps.transparency.models import Checkpoint
from apps.transparency.selectors import top_consistency
from apps.transparency.tree.merkle import verify_consistency
from apps.transparency.tree.note import NoteError, parse_checkpoint

# The stored checkpoints checked against each other, newest first: enough to catch a
# damaged top tree without walking a year of epochs.
RECENT_CHECKPOINTS = 100


@dataclass
class RestoreReport:
    orgs: list[dict[str, Any]] = field(default_factory=list)
    log: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.alerts

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "orgs": self.orgs, "log": self.log, "problems": self.problems,
                "alerts": self.alerts}  # fmt: skip


def _consistent(first: Checkpoint | Any, second: Checkpoint) -> bool:
    """``second`` extends ``first`` (sizes and roots of two checkpoints of one log)."""
    first_root, second_root = bytes(first.root), bytes(second.root)
    if first.size == second.size:
        return first_root == second_root
    if first.size == 0:
        return True
    proof = top_consistency(first=first.size, second=second.size)
    return verify_consistency(first.size, second.size, first_root, second_root, proof)


def restore_check(*, published_notes: list[str], origin: str) -> RestoreReport:
    """Every org's chain, the log's recent checkpoints, and each ``published_notes``
    checkpoint (saved before the backup) against the restored log."""
    report = RestoreReport()
    for org in Org.objects.order_by("slug"):
        check = mirror_chain_check(org=org)
        report.orgs.append({"org": org.slug, "size": check.size, "ok": check.ok})
        if not check.ok:
            report.problems.append(f"org {org.slug}: seq {check.first_bad_seq}: {check.problem}")
    recent = list(Checkpoint.objects.order_by("-epoch")[:RECENT_CHECKPOINTS])[::-1]
    latest = recent[-1] if recent else None
    report.log = {"epoch": latest.epoch if latest else 0, "size": latest.size if latest else 0,
                  "checkpoints_checked": len(recent)}  # fmt: skip
    for earlier, later in pairwise(recent):
        if not _consistent(earlier, later):
            report.problems.append(f"checkpoints {earlier.epoch} and {later.epoch} disagree")
    for note in published_notes:
        try:
            published = parse_checkpoint(note)
        except NoteError as error:
            report.problems.append(f"a published checkpoint does not parse: {error}")
            continue
        if published.origin != origin:
            report.problems.append(f"a published checkpoint names origin {published.origin!r}")
            continue
        restored_size = latest.size if latest else 0
        if published.size > restored_size:
            report.alerts.append(
                f"rollback: the restored log has {restored_size} leaves, but a checkpoint "
                f"of {published.size} was published before; witnesses and monitors will "
                "report the log went back. Agents' re-pushes refill the mirror."
            )
        elif latest is not None and not _consistent(published, latest):
            report.alerts.append(
                f"fork: the restored log does not extend the published checkpoint of size "
                f"{published.size}"
            )
    return report
