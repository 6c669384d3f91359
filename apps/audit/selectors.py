"""Reads of the audit app: windows of the org mirror chain (server.md §3), newest first;
the org's legal holds, and which of them cover a span of its receipts."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from apps.audit.models import HoldScope, LegalHold, ReceiptArchive
from apps.audit.retired import READABLE, ArchivedBodies
from apps.common.errors import NotFound
from apps.common.timestamps import utc_text
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import (
    RETIRED_BODY,
    ChainCheck,
    mirror_chain_check,
    mirror_head_get,
)
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


# What the chain window adds to a retired entry: that its body is archived, and where.
RETIRED_FIELDS = ("retired", "archive")


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
    archives = _archives_of(org, [entry["seq"] for entry in entries if not entry["receipt"]])
    for entry in entries:
        entry["supersedes_action_hash"] = entry["supersedes_action_hash"] or None
        entry["superseded_by"] = entry["superseded_by"] or None
        entry["retired"] = entry["receipt"] == RETIRED_BODY
        archive = archives.get(entry["seq"]) if entry["retired"] else None
        entry["archive"] = _archive_view(archive) if archive is not None else None
    oldest = entries[-1]["seq"] if entries else None
    next_before = oldest if oldest is not None and oldest > 1 and len(entries) == limit else None
    return ChainWindow(head=head, size=size, entries=entries, next_before=next_before)


def _archives_of(org: Org, seqs: list[int]) -> dict[int, ReceiptArchive]:
    """The archive holding each retired ``seq``'s body: one indexed read of the few
    archives the window's range touches (one archive per month)."""
    if not seqs:
        return {}
    archives = list(
        ReceiptArchive.objects.filter(
            org=org, last_seq__gte=min(seqs), first_seq__lte=max(seqs)
        ).order_by("first_seq")
    )
    return {seq: archive for seq in seqs for archive in archives if archive.covers(seq)}


def _archive_view(archive: ReceiptArchive) -> dict[str, Any]:
    return {
        "month": f"{archive.month:%Y-%m}",
        "name": archive.storage_name,
        "location": archive.location,
        "version": archive.storage_version,
        "sha256": archive.sha256,
        "first_seq": archive.first_seq,
        "last_seq": archive.last_seq,
        "locked_until": utc_text(archive.locked_until),
    }


def receipt_archive_of(*, org: Org, seq: int) -> ReceiptArchive | None:
    """The archive that holds entry ``seq``'s body (once its month was archived)."""
    return ReceiptArchive.objects.filter(org=org, first_seq__lte=seq, last_seq__gte=seq).first()


def audit_chain_verify(
    *,
    org: Org,
    against_archive: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ChainCheck:
    """The org's chain recomputed and every receipt re-verified (``mirror_chain_check``).
    A retired entry is checked by its stored digest, and must lie in an archive that was
    verified before it was retired (an emptied body anywhere else is a tampered row).
    ``against_archive``: each retired body is also read back from the archive storage and
    must match its digest and verify as a receipt."""
    with ExitStack() as files:
        bodies = ArchivedBodies(org=org, files=files)
        check = mirror_chain_check(
            org=org, progress=progress, archived_body=bodies.text if against_archive else None
        )
        if not check.ok or against_archive or not check.retired:
            return check
        retired = MirrorEntry.objects.filter(org=org, receipt=RETIRED_BODY)
        for archive in ReceiptArchive.objects.filter(org=org, state__in=READABLE):
            retired = retired.exclude(seq__gte=archive.first_seq, seq__lte=archive.last_seq)
        stray = retired.order_by("seq").values_list("seq", flat=True).first()
        if stray is not None:
            return ChainCheck(
                size=check.size, head=check.head, first_bad_seq=stray,
                problem="its body is gone, and no verified archive holds it",
                retired=check.retired,
            )  # fmt: skip
        return check


def legal_holds(*, org: Org) -> QuerySet[LegalHold]:
    """The org's legal holds, active and released, newest first."""
    return LegalHold.objects.filter(org=org).select_related("org").order_by("-set_at", "-id")


def legal_hold_get(*, org: Org, hold_id: str) -> LegalHold:
    hold = LegalHold.objects.filter(org=org, hold_id=hold_id).select_related("org").first()
    if hold is None:
        raise NotFound(f"no legal hold {hold_id!r} in this org")
    return hold


def legal_holds_blocking(
    org_id: int, *, start: datetime | None, end: datetime | None
) -> list[LegalHold]:
    """The org's active legal holds that cover any of its receipts received in
    ``[start, end)`` (None: open on that side): the one rule every deletion asks before it
    removes what a hold may cover (receipt bodies, evidence exports).

    An org-wide hold covers everything; a date-range hold covers the range's days, so it
    blocks wherever the two overlap; a session hold blocks when the org has receipts of
    that session received in ``[start, end)``, looked up through the (org, session_id,
    session_seq) index, one bounded query per session hold. An org has few holds: they are
    read in one query through (org, set_at).
    """
    active = LegalHold.objects.filter(org_id=org_id, released_at__isnull=True).order_by("set_at")
    blocking = []
    for hold in active:
        if hold.scope == HoldScope.ORG:
            blocking.append(hold)
        elif hold.scope == HoldScope.RANGE:
            hold_start, hold_end = hold.received_span
            if (hold_start is None or end is None or hold_start < end) and (
                hold_end is None or start is None or hold_end > start
            ):
                blocking.append(hold)
        elif _session_received(org_id, hold.session_id, start, end):
            blocking.append(hold)
    return blocking


def session_received_rows(
    org_id: int, session_id: str, start: datetime | None, end: datetime | None
) -> QuerySet[MirrorEntry]:
    """The org's receipts of ``session_id`` received in ``[start, end)``: asked of the
    session's rows through (org, session_id, session_seq) (a span of a busy org holds
    millions of receipts, a session a few; tests/audit/test_legal_hold_coverage.py holds the
    generic plan to it)."""
    rows = MirrorEntry.objects.filter(org_id=org_id, session_id=session_id).order_by()
    if start is not None:
        rows = rows.filter(received_at__gte=start)
    if end is not None:
        rows = rows.filter(received_at__lt=end)
    return rows


def _session_received(
    org_id: int, session_id: str, start: datetime | None, end: datetime | None
) -> bool:
    return session_received_rows(org_id, session_id, start, end).exists()
