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
* ``policy_approvals.json`` - the org's co-signed policy changes: each one's statement and
  every vote's approval token as submitted, so who approved which policy checks offline;
* ``sessions.json`` and ``sessions/NNNN.jsonl`` - each agent session of the window; a session
  whose action receipts run from seq 0 without a gap gets a file (in session order; of a
  suspended receipt and its approved form, the one its successor links to) that
  ``verify_receipts --chain`` checks as one session chain;
* ``VERIFY.md`` - how to check all of it.

Memory: constant, whatever the window (an export built in memory would let one auditor
exhaust a worker; deploy/bench/evidence_memory.py measures it). The layout stays as it was,
manifest first: a tar member's size precedes its data and the manifest hashes every other
member, so every member is spooled to disk before the first byte is sent:

1. :func:`evidence_export` reads the org's rows through server-side cursors
   (``.iterator(chunk_size=CURSOR_ROWS)``) and writes each member to an anonymous temporary
   file (``tempfile.TemporaryFile``: unlinked at once, so its space returns when it is
   closed or the process dies), hashing and counting it on the way. A JSON member is
   written one item at a time, byte for byte what ``json.dumps(indent=1)`` writes for the
   whole value (``archive.write_json``); the manifest last, the same way. Held in memory:
   one cursor chunk, one JSON item, and in a session a run of consecutive positions that
   each have two forms (until the successor that decides between them). The reads run in
   one transaction, ``REPEATABLE READ`` when the export opens it, so the members agree.
2. :class:`~apps.audit.archive.EvidenceArchive` yields the tar (the members, order and
   bytes ``tarfile`` would write) in chunks of ``STREAM_CHUNK`` bytes read back from those
   files; its size is known beforehand (``Content-Length``).

Every database read is done in step 1, inside the request (or command) that asks for the
export, under its org context and its error handling: a database failure is answered 503,
never as a truncated download, and nothing depends on the connection or its org context
once the view has returned. The cost moves to disk: about three times the window's
receipt text (``receipts.jsonl``, ``chain.json``, the session files) in ``TMPDIR``, for the
life of the response. The session files are ordered by session id in code point order, so
that query sorts the window on the server: one statement whose time grows with the window,
bounded by ``DB_STATEMENT_TIMEOUT_MS`` like any other.

Session files come after the other members in session order (``sessions/9999.jsonl`` before
``sessions/10000.jsonl``).

This module is the use case, and the download; the parts live beside it, one concern
each: :mod:`apps.audit.window` (the window, its rows, the snapshot),
:mod:`apps.audit.members` (what each member holds), :mod:`apps.audit.manifest`
(``manifest.json``, ``VERIFY.md``) and :mod:`apps.audit.archive` (spooling, streamed
JSON, the tar).
"""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from datetime import datetime

from django.http import StreamingHttpResponse
from django.utils import timezone

from apps.audit.archive import EvidenceArchive, Member, Spool, write_json
from apps.audit.manifest import verify_md, write_manifest
from apps.audit.members import (
    approvals,
    approver_keys,
    chain_entries,
    policy_approvals,
    session_index,
    write_proofs,
    write_receipts,
)
from apps.audit.retired import ArchivedBodies
from apps.audit.window import EvidenceWindow, parse_window, snapshot, window_rows
from apps.receipts.selectors import mirror_head_get
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org

# What callers (the API, the console, the command, the background job) take from here.
__all__ = [
    "EvidenceArchive",
    "EvidenceWindow",
    "evidence_export",
    "evidence_response",
    "parse_window",
]


def evidence_export(
    *,
    org: Org,
    window: EvidenceWindow,
    now: datetime | None = None,
    actor: Actor = OPERATOR,
    proofs: bool = False,
    audited: bool = True,
) -> EvidenceArchive:
    """The evidence tar for ``org``'s receipts received within ``window``, built on disk
    (see the module docstring): every database read is done when this returns, and the
    export is in the org's audit trail (who, which window, how many receipts).

    Receipts whose bodies are retired are served from their archives (each archived month
    read from the archive storage), so an export of a retired range holds what an export
    made before the retirement held. ``proofs``: a member ``proofs.jsonl`` too, each
    receipt's transparency proof object against the latest checkpoint, one a line in seq
    order (the archive of a month carries them). ``audited``: False for the archive, which
    records its own act."""
    now = now or timezone.now()
    with ExitStack() as files:

        def spool() -> Spool:
            return Spool(files.enter_context(tempfile.TemporaryFile()))

        receipts, chain, approved, keys, sessions, records, manifest, policies = (
            spool() for _ in range(8)
        )
        proved = spool() if proofs else None
        session_data = files.enter_context(tempfile.TemporaryFile())
        body = ArchivedBodies(org=org, files=files).body
        with snapshot():
            stored = mirror_head_get(org=org)
            size, head = stored.size, stored.head
            rows = window_rows(org, window, size)
            seen = write_receipts(receipts, rows, body)
            write_json(
                chain,
                lambda entries: {"head": head, "size": size, "entries": entries, "next": None},
                chain_entries(rows, body),
            )
            write_json(approved, lambda items: items, approvals(org, rows))
            write_json(keys, lambda items: items, approver_keys(org))
            write_json(policies, lambda items: items, policy_approvals(org))
            write_json(
                sessions, lambda items: items, session_index(rows, session_data, records, body)
            )
            if proved is not None:
                write_proofs(proved, org, rows)
        if audited:
            _record_export(org, window, actor, seen.count, size)
        verify = verify_md(org=org, window=window, now=now, proofs=proofs)
        fixed = {
            "receipts.jsonl": receipts,
            "chain.json": chain,
            "approvals.json": approved,
            "approver_keys.json": keys,
            "policy_approvals.json": policies,
            "sessions.json": sessions,
            **({"proofs.jsonl": proved} if proved is not None else {}),
        }
        write_manifest(
            manifest, org=org, window=window, now=now, seen=seen, fixed=fixed,
            session_records=records.file, verify=verify,
        )  # fmt: skip
        members = [
            Member("manifest.json", manifest.file, manifest.offset, manifest.size),
            Member("VERIFY.md", None, 0, len(verify), verify),
            *(
                Member(name, member.file, member.offset, member.size)
                for name, member in sorted(fixed.items())
            ),
        ]  # then the session files, in session order
        archive = EvidenceArchive(
            root=f"evidence-{org.slug}/",
            mtime=int(now.timestamp()),
            members=members,
            session_data=session_data,
            session_records=records.file,
            files=files.pop_all(),
        )
    return archive


def _record_export(org: Org, window: EvidenceWindow, actor: Actor, count: int, size: int) -> None:
    org_audit_record(
        org=org, kind=AuditKind.EVIDENCE_EXPORTED, actor=actor,
        summary=f"Exported evidence ({window.start or 'start'} to {window.end or 'now'}), "
        f"{count} receipts",
        detail={
            "from": window.start.isoformat() if window.start else None,
            "to": window.end.isoformat() if window.end else None,
            "receipts": count,
            "chain_size": size,
        },
    )  # fmt: skip


def evidence_response(archive: EvidenceArchive, *, org: Org) -> StreamingHttpResponse:
    """The download of a built archive (the API and the console): streamed from disk, with
    its length; the response closes the archive when it is done."""
    response = StreamingHttpResponse(archive, content_type="application/x-tar")
    response["Content-Length"] = str(archive.size)
    response["Content-Disposition"] = f'attachment; filename="evidence-{org.slug}.tar"'
    return response
