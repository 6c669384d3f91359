"""Evidence export: one tar an auditor can check offline, without this service.

Contents (``manifest.json`` lists each file's size, SHA-256 and BLAKE3):

* ``receipts.jsonl`` - the stored receipts of the window, oldest first, one per line, byte
  for byte as the mirror stored them (JCS text);
* ``chain.json`` - the same entries in the shape of ``GET /v1/audit/chain`` (newest first,
  each with its ``receipt`` text), plus the chain's current head and size: every
  ``chain_hash`` of the window recomputes from the first entry's ``prev_chain_hash``;
* ``approvals.json`` - the approvals of the window's actions with their votes, the relayed
  legs (record text and co-signature, verbatim) and their history;
* ``approver_keys.json`` - the org's approver keys, with when they were registered and
  revoked;
* ``sessions.json`` and ``sessions/NNNN.jsonl`` - each agent session of the window; a session
  whose action receipts run from seq 0 without a gap gets a file (in session order; of a
  suspended receipt and its approved form, the one its successor links to) that
  ``verify_receipts --chain`` checks as one session chain;
* ``VERIFY.md`` - how to check all of it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from blake3 import blake3
from django.utils import timezone

from apps.approvals.models import Approval, ApproverKey
from apps.approvals.services import approval_roster
from apps.audit.selectors import ENTRY_FIELDS
from apps.common.errors import InvalidInput
from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.receipts.verifier.chain import link_hash
from apps.tenancy.models import Org

VERIFY_MD = """\
# Verifying this evidence export

This archive was exported from a heso receipt mirror for org `{org}`, covering receipts
received from {start} to {end} (UTC), generated at {generated}.

1. **Integrity of the files.** `manifest.json` lists every other file with its size,
   SHA-256 and BLAKE3. Check them with `sha256sum`/`b3sum`, or any tool you trust.
2. **Every receipt verifies on its own.** Each line of `receipts.jsonl` is a signed
   ActionReceipt. With the service's code (no database needed):

       python manage.py verify_receipts receipts.jsonl

   prints one verdict per line and exits 0 only when all are `Valid`. The browser page
   `/verify` of any mirror does the same entirely in your browser (nothing is uploaded):
   drop `receipts.jsonl` on it.
3. **The chain is unbroken.** `chain.json` holds the window's entries newest first. For each
   entry, `receipt_digest` = BLAKE3 of `receipt` (the exact stored text), and
   `chain_hash` = BLAKE3("receipt-mirror-chain/v1\\0" || prev || u64_le(seq) ||
   LP(action_hash) || receipt_digest || LP(supersedes_action_hash or "")), where prev is the
   previous entry's `chain_hash` as 32 raw bytes (zero bytes before seq 1) and
   LP(x) = u64_le(len(x)) || x. Drop `chain.json` on the `/verify` page to recompute it.
   When the window starts at seq 1 it is the whole chain; `head` and `size` are the chain's
   state at export time, so a later export must extend it, never rewrite it.
4. **Agent sessions.** `sessions.json` lists the agent sessions of the window. Each session
   whose action receipts run from seq 0 without a gap has a file `sessions/NNNN.jsonl`
   (where a suspended receipt was approved, the form its successor links to), checked as one
   hash-linked session chain by

       python manage.py verify_receipts --chain sessions/0001.jsonl

   A session that starts before the window (or has a gap in it) has no file; export a
   wider window to check it. The `/verify` page accepts the same lines as a JSON array.
5. **Approvals.** `approvals.json` carries each vote's approver key and decision and the
   co-signed legs verbatim; `approver_keys.json` says which keys were registered (and
   revoked) when. An L1 receipt's approver signature in `receipts.jsonl` must come from one
   of those keys.
"""


@dataclass(frozen=True)
class EvidenceWindow:
    start: date | None
    end: date | None


def parse_window(start: str | None, end: str | None) -> EvidenceWindow:
    """``YYYY-MM-DD`` bounds, both inclusive; either may be absent."""

    def parse(text: str | None, name: str) -> date | None:
        if not text:
            return None
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{name}: a date YYYY-MM-DD, got {text!r}") from None

    window = EvidenceWindow(parse(start, "from"), parse(end, "to"))
    if window.start and window.end and window.start > window.end:
        raise InvalidInput("from: must not be after to")
    return window


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n").encode()


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


SESSION_FIELDS = ("session_id", "session_seq")


def _entries(org: Org, window: EvidenceWindow, size: int) -> list[dict[str, Any]]:
    # Only entries the head already covers: one appended while the export runs would make
    # the archive's head disagree with its last entry.
    rows = MirrorEntry.objects.filter(org=org, seq__lte=size)
    if window.start:
        rows = rows.filter(received_at__gte=datetime.combine(window.start, time.min, UTC))
    if window.end:
        end = datetime.combine(window.end + timedelta(days=1), time.min, UTC)
        rows = rows.filter(received_at__lt=end)
    entries = list(rows.order_by("seq").values(*ENTRY_FIELDS, *SESSION_FIELDS))
    for entry in entries:
        entry["supersedes_action_hash"] = entry["supersedes_action_hash"] or None
        entry["superseded_by"] = entry["superseded_by"] or None
        entry["received_at"] = _iso(entry["received_at"])
    return entries


def _session_chain(forms: dict[int, list[str]]) -> list[str]:
    """One receipt per position, walking back from the newest: where a position has two
    forms (a suspended receipt and the approved one superseding it), the one its successor
    links to (either is allowed), else the newest."""
    chosen: list[str] = []
    for seq in sorted(forms, reverse=True):
        pick = forms[seq][-1]
        if chosen:
            wanted = json.loads(chosen[-1])["content"].get("prev_receipt_hash")
            linked = [
                text for text in forms[seq] if link_hash(json.loads(text)["content"]) == wanted
            ]
            pick = linked[-1] if linked else pick
        chosen.append(pick)
    return chosen[::-1]


def _sessions(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """The window's agent sessions, and a chain file for each one complete from seq 0."""
    by_session: dict[str, dict[int, list[str]]] = {}
    for entry in entries:  # oldest first
        if not entry["session_id"] or entry["session_seq"] is None:
            continue
        if entry["kind"] != "action":
            continue  # lifecycle receipts are not links of a session chain
        forms = by_session.setdefault(entry["session_id"], {})
        forms.setdefault(entry["session_seq"], []).append(entry["receipt"])
    index: list[dict[str, Any]] = []
    files: dict[str, bytes] = {}
    for number, (session_id, forms) in enumerate(sorted(by_session.items()), start=1):
        seqs = sorted(forms)
        name = f"sessions/{number:04d}.jsonl" if seqs == list(range(len(seqs))) else None
        if name is not None:
            files[name] = "".join(text + "\n" for text in _session_chain(forms)).encode()
        index.append(
            {"session_id": session_id, "receipts": len(seqs), "first_seq": seqs[0],
             "last_seq": seqs[-1], "file": name}
        )  # fmt: skip
    return index, files


def _approvals(org: Org, action_hashes: set[str]) -> list[dict[str, Any]]:
    approvals = (
        Approval.objects.filter(org=org, action_hash__in=action_hashes)
        .prefetch_related("votes", "events")
        .order_by("created_at", "id")
    )
    return [
        {
            "approval_id": approval.approval_id,
            "action_hash": approval.action_hash,
            "status": approval.status,
            "threshold": approval.threshold,
            # Frozen at the first vote; before it, the keys eligible when exported.
            "roster": approval_roster(approval),
            "roster_frozen": approval.roster_frozen_at is not None,
            "rule_id": approval.rule_id,
            "created_at": _iso(approval.created_at),
            "resolved_at": _iso(approval.resolved_at),
            "votes": [
                {
                    "approver_public_key": vote.approver_public_key,
                    "decision": vote.decision,
                    "voted_at": _iso(vote.voted_at),
                    "nonce": vote.nonce,
                    "leg": {"record": vote.record, "co_sig_b64": vote.co_sig_b64}
                    if vote.record
                    else None,
                }
                for vote in approval.votes.all()
            ],
            "history": [
                {"kind": event.kind, "at": _iso(event.at), "detail": event.detail}
                for event in approval.events.all()
            ],
        }
        for approval in approvals
    ]


def _approver_keys(org: Org) -> list[dict[str, Any]]:
    return [
        {
            "key_id": key.key_id,
            "public_key": key.public_key,
            "label": key.label,
            "registered_at": _iso(key.created_at),
            "revoked_at": _iso(key.revoked_at),
        }
        for key in ApproverKey.objects.filter(org=org).order_by("created_at", "id")
    ]


def evidence_export(*, org: Org, window: EvidenceWindow, now: datetime | None = None) -> bytes:
    """The evidence tar for ``org``'s receipts received within ``window``."""
    now = now or timezone.now()
    head_row = MirrorHead.objects.filter(org=org).values_list("size", "head").first()
    size, head = head_row or (0, EMPTY_CHAIN_HEAD)
    entries = _entries(org, window, size)
    sessions, session_files = _sessions(entries)
    for entry in entries:
        for field in SESSION_FIELDS:  # chain.json keeps the shape of GET /v1/audit/chain
            del entry[field]
    files: dict[str, bytes] = {
        "receipts.jsonl": "".join(entry["receipt"] + "\n" for entry in entries).encode(),
        "chain.json": _json_bytes(
            {"head": head, "size": size, "entries": entries[::-1], "next": None}
        ),
        "approvals.json": _json_bytes(_approvals(org, {entry["action_hash"] for entry in entries})),
        "approver_keys.json": _json_bytes(_approver_keys(org)),
        "sessions.json": _json_bytes(sessions),
        **session_files,
        "VERIFY.md": VERIFY_MD.format(
            org=org.slug,
            start=window.start or "the first receipt",
            end=window.end or "the export",
            generated=_iso(now),
        ).encode(),
    }
    manifest = {
        "org": org.slug,
        "generated_at": _iso(now),
        "from": window.start.isoformat() if window.start else None,
        "to": window.end.isoformat() if window.end else None,
        "receipts": len(entries),
        "first_seq": entries[0]["seq"] if entries else None,
        "last_seq": entries[-1]["seq"] if entries else None,
        "files": {
            name: {
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "blake3": blake3(data).hexdigest(),
            }
            for name, data in files.items()
        },
    }
    files["manifest.json"] = _json_bytes(manifest)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in ("manifest.json", *sorted(set(files) - {"manifest.json"})):
            info = tarfile.TarInfo(f"evidence-{org.slug}/{name}")
            info.size = len(files[name])
            info.mtime = int(now.timestamp())
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(files[name]))
    return buffer.getvalue()
