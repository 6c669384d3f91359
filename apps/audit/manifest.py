"""The two members an auditor reads first: ``manifest.json`` (the export's org, window and
receipt range, and every other member's size, SHA-256 and BLAKE3) and ``VERIFY.md`` (how to
check all of it, offline, without this service)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

from blake3 import blake3

from apps.audit.archive import Spool, iso, write_json
from apps.audit.members import Receipts
from apps.audit.window import EvidenceWindow
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
6. **Policy changes.** `policy_approvals.json` lists each co-signed policy change with the
   statement its approvers signed and every vote's approval token (base64). A vote checks
   as an approval token (approvals.md §1-§3) with scope `policy:deploy` whose signed bytes
   are the statement's RFC 8785 canonical bytes; `status` `activated` needs `quorum`
   distinct approving keys of `approver_keys.json`. Drop one entry on the `/verify` page to
   check it in the browser.
"""

VERIFY_PROOFS_MD = """\
6. **Transparency proofs.** `proofs.jsonl` holds, for each receipt in seq order, its proof
   object (`proof`, for `seq` and `action_hash`) against one checkpoint of the transparency
   log: the receipt's leaf in the org's tree, that tree's head in the checkpoint's top
   tree, and the checkpoint note with its witnesses' cosignatures. Each line is a check as

       python manage.py verify_transparency --jsonl proofs.jsonl

   reads it, naming the log's own `origin` and no witness: put the origin and the witness
   keys (`witness_keys`, `required_cosignatures`) you trust in each line to check it
   against your own trust. A later checkpoint of the log must extend this one.
"""


def verify_md(*, org: Org, window: EvidenceWindow, now: datetime, proofs: bool = False) -> bytes:
    text = VERIFY_MD.format(
        org=org.slug,
        start=window.start or "the first receipt",
        end=window.end or "the export",
        generated=iso(now),
    )
    return (text + (VERIFY_PROOFS_MD if proofs else "")).encode()


def write_manifest(
    manifest: Spool,
    *,
    org: Org,
    window: EvidenceWindow,
    now: datetime,
    seen: Receipts,
    fixed: Mapping[str, Spool],
    session_records: IO[bytes],
    verify: bytes,
) -> None:
    """``manifest.json``: every member but itself, the fixed ones, then each session file
    (``session_records``: a line ``[name, offset, facts]`` each), then ``VERIFY.md``."""

    def manifest_files() -> Iterator[tuple[str, dict[str, Any]]]:
        for name, member in fixed.items():
            yield name, member.facts()
        session_records.seek(0)
        for line in session_records:
            name, _, facts = json.loads(line)
            yield name, facts
        yield (
            "VERIFY.md",
            {
                "bytes": len(verify),
                "sha256": hashlib.sha256(verify).hexdigest(),
                "blake3": blake3(verify).hexdigest(),
            },
        )

    write_json(
        manifest,
        lambda listed: {
            "org": org.slug,
            "generated_at": iso(now),
            "from": window.start.isoformat() if window.start else None,
            "to": window.end.isoformat() if window.end else None,
            "receipts": seen.count,
            "first_seq": seen.first_seq,
            "last_seq": seen.last_seq,
            "files": listed,
        },
        manifest_files(),
        as_object=True,
    )
