"""Windows of the org mirror chain (server.md §3), newest first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_head_get
from apps.tenancy.models import Org

# The members of a chain entry. ``receipt`` is the stored JCS text, so a verifier can
# recompute ``receipt_digest`` (BLAKE3 of those bytes) and from it every ``chain_hash`` of
# the window, starting from the oldest entry's ``prev_chain_hash``.
ENTRY_FIELDS = (
    "seq",
    "action_hash",
    "kind",
    "trust_level",
    "claimed_trust_level",
    "receipt_digest",
    "supersedes_action_hash",
    "superseded_by",
    "prev_chain_hash",
    "chain_hash",
    "received_at",
    "receipt",
)


@dataclass(frozen=True)
class ChainWindow:
    head: str  # the newest entry's chain_hash (64 zeros for an empty chain)
    size: int  # the number of entries in the whole chain (= the newest seq)
    entries: list[dict[str, Any]]
    next_before: int | None  # pass as ?before= for the following (older) page


def audit_chain_window(*, org: Org, limit: int, before: int | None = None) -> ChainWindow:
    """Up to ``limit`` entries with ``seq < before`` (or the newest), newest first.

    Two indexed queries: the head row, and a range scan of (org, seq).
    """
    stored = mirror_head_get(org=org)
    size, head = stored.size, stored.head
    rows = MirrorEntry.objects.filter(org=org)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    entries = list(rows.order_by("-seq").values(*ENTRY_FIELDS)[:limit])
    for entry in entries:
        entry["supersedes_action_hash"] = entry["supersedes_action_hash"] or None
        entry["superseded_by"] = entry["superseded_by"] or None
    oldest = entries[-1]["seq"] if entries else None
    next_before = oldest if oldest is not None and oldest > 1 and len(entries) == limit else None
    return ChainWindow(head=head, size=size, entries=entries, next_before=next_before)
