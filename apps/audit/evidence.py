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

Memory: constant, whatever the window (issue 15: an export built in memory let one auditor
exhaust a worker; deploy/bench/evidence_memory.py measures it). The layout stays as it was,
manifest first: a tar member's size precedes its data and the manifest hashes every other
member, so every member is spooled to disk before the first byte is sent:

1. :func:`evidence_export` reads the org's rows through server-side cursors
   (``.iterator(chunk_size=CURSOR_ROWS)``) and writes each member to an anonymous temporary
   file (``tempfile.TemporaryFile``: unlinked at once, so its space returns when it is
   closed or the process dies), hashing and counting it on the way. A JSON member is
   written one item at a time, byte for byte what ``json.dumps(indent=1)`` writes for the
   whole value (:func:`_write_json`); the manifest last, the same way. Held in memory: one
   cursor chunk, one JSON item, and in a session a run of consecutive positions that each
   have two forms (until the successor that decides between them). The reads run in one
   transaction, ``REPEATABLE READ`` when the export opens it, so the members agree.
2. :class:`EvidenceArchive` yields the tar (the members, order and bytes ``tarfile`` would
   write) in chunks of ``STREAM_CHUNK`` bytes read back from those files; its size is
   known beforehand (``Content-Length``).

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
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import groupby
from operator import itemgetter
from types import TracebackType
from typing import IO, Any

from blake3 import blake3
from django.db import connection, transaction
from django.db.models import QuerySet
from django.db.models.expressions import Combinable
from django.db.models.functions import Collate
from django.http import StreamingHttpResponse
from django.utils import timezone

from apps.approvals.models import Approval, ApproverKey
from apps.approvals.selectors import approval_roster
from apps.audit.selectors import ENTRY_FIELDS
from apps.common.errors import InvalidInput
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_head_get
from apps.receipts.verifier.chain import link_hash
from apps.tenancy.audit_trail import OPERATOR, Actor, org_audit_record
from apps.tenancy.models import AuditKind, Org
from apps.tenancy.org_context import settle

# Rows per server-side cursor fetch: a receipt is a few KB, so about a megabyte in flight.
CURSOR_ROWS = 500
# Approvals per fetch: each comes as a model with its votes and events prefetched (several
# KB of objects), so fewer at a time.
APPROVAL_ROWS = 50
# Bytes per chunk handed to the web server.
STREAM_CHUNK = 64 * 1024
# The window ends at midnight after ``to``: the last day whose next day a datetime holds.
LAST_DAY = date.max - timedelta(days=1)

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
            day = date.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{name}: a date YYYY-MM-DD, got {text!r}") from None
        if day > LAST_DAY:
            raise InvalidInput(f"{name}: a date no later than {LAST_DAY.isoformat()}")
        return day

    window = EvidenceWindow(parse(start, "from"), parse(end, "to"))
    if window.start and window.end and window.start > window.end:
        raise InvalidInput("from: must not be after to")
    return window


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n"


def _json_item(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str)


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


class _Spool:
    """One member's bytes on their way into the archive: appended to a temporary file,
    hashed and counted as they are written."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.offset = file.seek(0, 2)
        self.size = 0
        self._sha256 = hashlib.sha256()
        self._blake3 = blake3()

    def write(self, text: str) -> None:
        data = text.encode()
        self.file.write(data)
        self._sha256.update(data)
        self._blake3.update(data)
        self.size += len(data)

    def facts(self) -> dict[str, Any]:
        """The member's line in the manifest."""
        return {
            "bytes": self.size,
            "sha256": self._sha256.hexdigest(),
            "blake3": self._blake3.hexdigest(),
        }

    def discard(self) -> None:
        """Drop what this spool wrote (it was the file's last writer)."""
        self.file.seek(self.offset)
        self.file.truncate()


# Stands for the streamed list or object in the skeleton of a JSON member.
_SLOT = "\ue000streamed\ue000"


def _write_json(
    spool: _Spool,
    shape: Callable[[Any], Any],
    items: Iterable[Any],
    *,
    as_object: bool = False,
) -> None:
    """Write ``_json_text(shape(collection))`` where the collection (a list of ``items``,
    or an object of ``(name, value)`` pairs) is never held: byte for byte what
    ``json.dumps(indent=1)`` writes, since each item is indented one space per level of
    its place in the skeleton."""
    text = _json_text(shape({_SLOT: None} if as_object else [_SLOT]))
    token = json.dumps(_SLOT, ensure_ascii=False) + (": null" if as_object else "")
    at = text.index(token)
    line = text.rindex("\n", 0, at) + 1
    indent, head, tail = text[line:at], text[:line], text[at + len(token) :]
    written = False
    for item in items:
        spool.write(",\n" if written else head)
        if as_object:
            name, value = item
            piece = json.dumps(name, ensure_ascii=False) + ": " + _json_item(value)
        else:
            piece = _json_item(item)
        spool.write(indent + piece.replace("\n", "\n" + indent))
        written = True
    spool.write(tail if written else _json_text(shape({} if as_object else [])))


def _window_rows(org: Org, window: EvidenceWindow, size: int) -> QuerySet[MirrorEntry]:
    # Only entries the head already covers: one appended while the export runs would make
    # the archive's head disagree with its last entry.
    rows = MirrorEntry.objects.filter(org=org, seq__lte=size)
    if window.start:
        rows = rows.filter(received_at__gte=datetime.combine(window.start, time.min, UTC))
    if window.end:
        end = datetime.combine(window.end + timedelta(days=1), time.min, UTC)
        rows = rows.filter(received_at__lt=end)
    return rows


@dataclass
class _Receipts:
    count: int = 0
    first_seq: int | None = None
    last_seq: int | None = None


def _write_receipts(spool: _Spool, rows: QuerySet[MirrorEntry]) -> _Receipts:
    seen = _Receipts()
    ordered = rows.order_by("seq").values_list("seq", "receipt")
    for seq, receipt in ordered.iterator(chunk_size=CURSOR_ROWS):
        spool.write(receipt + "\n")
        seen.count += 1
        seen.first_seq = seq if seen.first_seq is None else seen.first_seq
        seen.last_seq = seq
    return seen


def _chain_entries(rows: QuerySet[MirrorEntry]) -> Iterator[dict[str, Any]]:
    """The window's entries newest first, as ``GET /v1/audit/chain`` shows them."""
    for entry in rows.order_by("-seq").values(*ENTRY_FIELDS).iterator(chunk_size=CURSOR_ROWS):
        entry["supersedes_action_hash"] = entry["supersedes_action_hash"] or None
        entry["superseded_by"] = entry["superseded_by"] or None
        entry["received_at"] = _iso(entry["received_at"])
        yield entry


def _session_chain(positions: list[list[str]]) -> list[str]:
    """One receipt per position, walking back from the newest: where a position has two
    forms (a suspended receipt and the approved one superseding it), the one its successor
    links to (either is allowed), else the newest."""
    chosen: list[str] = []
    for forms in reversed(positions):
        pick = forms[-1]
        if chosen and len(forms) > 1:
            wanted = json.loads(chosen[-1])["content"].get("prev_receipt_hash")
            linked = [text for text in forms if link_hash(json.loads(text)["content"]) == wanted]
            pick = linked[-1] if linked else pick
        chosen.append(pick)
    return chosen[::-1]


def _bytewise(field: str) -> Combinable | str:
    """Order by code point, as Python sorts str: PostgreSQL's "C" collation (UTF-8 bytes
    sort in code point order); SQLite compares bytes already."""
    return Collate(field, "C") if connection.vendor == "postgresql" else field


def _session_index(
    rows: QuerySet[MirrorEntry], data: IO[bytes], records: _Spool
) -> Iterator[dict[str, Any]]:
    """The window's agent sessions (``sessions.json``), each complete one's chain file
    appended to ``data`` on the way, with a line ``[name, offset, facts]`` in ``records``.

    Rows come by session, position and seq; a position's choice depends only on its
    successor, so the chain is written whenever a position has a single form and only a
    run of positions with two forms waits in memory."""
    links = (
        rows.filter(kind="action", session_seq__isnull=False)  # lifecycle receipts are no links
        .exclude(session_id="")
        .order_by(_bytewise("session_id"), "session_seq", "seq")
        .values_list("session_id", "session_seq", "receipt")
        .iterator(chunk_size=CURSOR_ROWS)
    )
    for number, (session_id, session_rows) in enumerate(groupby(links, key=itemgetter(0)), start=1):
        spool = _Spool(data)
        count, first_seq, last_seq, complete = 0, None, None, True
        waiting: list[list[str]] = []
        for seq, position_rows in groupby(session_rows, key=itemgetter(1)):
            forms = [row[2] for row in position_rows]
            first_seq = seq if first_seq is None else first_seq
            last_seq = seq
            complete = complete and seq == count  # from seq 0 without a gap
            count += 1
            if not complete:
                waiting.clear()
                continue
            waiting.append(forms)
            if len(forms) == 1:
                for text in _session_chain(waiting):
                    spool.write(text + "\n")
                waiting.clear()
        name = f"sessions/{number:04d}.jsonl" if complete else None
        if name is None:
            spool.discard()
        else:
            for text in _session_chain(waiting):
                spool.write(text + "\n")
            records.write(json.dumps([name, spool.offset, spool.facts()]) + "\n")
        yield {"session_id": session_id, "receipts": count, "first_seq": first_seq,
               "last_seq": last_seq, "file": name}  # fmt: skip


def _approvals(org: Org, rows: QuerySet[MirrorEntry]) -> Iterator[dict[str, Any]]:
    approvals = (
        Approval.objects.filter(org=org, action_hash__in=rows.values("action_hash"))
        .prefetch_related("votes", "events")
        .order_by("created_at", "id")
    )
    for approval in approvals.iterator(chunk_size=APPROVAL_ROWS):
        item = {
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
                    # A vote the explicit open set aside: kept, never counted.
                    **(
                        {
                            "set_aside_at": _iso(vote.set_aside_at),
                            "set_aside_reason": vote.set_aside_reason,
                        }
                        if vote.set_aside_at
                        else {}
                    ),
                }
                for vote in approval.votes.all()
            ],
            "history": [
                {"kind": event.kind, "at": _iso(event.at), "detail": event.detail}
                for event in approval.events.all()
            ],
        }
        # Prefetching ties each vote and event back to its approval: a reference cycle per
        # approval, which only the cycle collector frees, so garbage would grow with the
        # window. Dropping the prefetched rows breaks it.
        approval._prefetched_objects_cache.clear()  # type: ignore[attr-defined]
        yield item


def _approver_keys(org: Org) -> Iterator[dict[str, Any]]:
    keys = ApproverKey.objects.filter(org=org).order_by("created_at", "id")
    for key in keys.iterator(chunk_size=CURSOR_ROWS):
        yield {
            "key_id": key.key_id,
            "public_key": key.public_key,
            "label": key.label,
            "registered_at": _iso(key.created_at),
            "revoked_at": _iso(key.revoked_at),
        }


@contextmanager
def _snapshot() -> Iterator[None]:
    """One transaction for every read of the export; a snapshot (``REPEATABLE READ``, read
    only) when the export opens it, so the members agree with each other. Inside it the
    cursors are plain server-side cursors (outside one, PostgreSQL would materialize each
    result ``WITH HOLD`` before the first row)."""
    settle()  # a finished request's context is reset before the transaction's first statement
    opens = not connection.in_atomic_block
    with transaction.atomic():
        if opens and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


@dataclass(frozen=True)
class _Member:
    name: str
    file: IO[bytes] | None  # None: ``data`` holds the bytes
    offset: int
    size: int
    data: bytes = b""


class EvidenceArchive:
    """A built evidence tar, on disk: iterate it once for its bytes (``size`` of them),
    then close it (a ``with`` block, or the streaming response when it is closed)."""

    def __init__(
        self,
        *,
        root: str,
        mtime: int,
        members: list[_Member],
        session_data: IO[bytes],
        session_records: IO[bytes],
        files: ExitStack,
    ) -> None:
        self._root = root
        self._mtime = mtime
        self._members = members
        self._session_data = session_data
        self._session_records = session_records
        self._files = files
        self._members_size = sum(
            len(self._header(member)) + member.size + -member.size % tarfile.BLOCKSIZE
            for member in self._all_members()
        )
        # Two zero blocks end the archive, then zeros up to a whole record.
        end = self._members_size + 2 * tarfile.BLOCKSIZE
        self.size = end + -end % tarfile.RECORDSIZE

    def _all_members(self) -> Iterator[_Member]:
        yield from self._members
        self._session_records.seek(0)
        for line in self._session_records:
            name, offset, facts = json.loads(line)
            yield _Member(name, self._session_data, offset, facts["bytes"])

    def _header(self, member: _Member) -> bytes:
        info = tarfile.TarInfo(self._root + member.name)
        info.size = member.size
        info.mtime = self._mtime
        info.mode = 0o644
        return info.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")

    def _pieces(self) -> Iterator[bytes]:
        """The tar as ``tarfile`` writes it: each member's header, data and padding to a
        block, two zero blocks, then zeros up to a whole record."""
        for member in self._all_members():
            yield self._header(member)
            if member.file is None:
                yield member.data
            else:
                member.file.seek(member.offset)
                left = member.size
                while left:
                    data = member.file.read(min(left, STREAM_CHUNK))
                    if not data:
                        raise RuntimeError(f"evidence spool of {member.name} ended early")
                    left -= len(data)
                    yield data
            yield bytes(-member.size % tarfile.BLOCKSIZE)
        yield bytes(self.size - self._members_size)

    def __iter__(self) -> Iterator[bytes]:
        """Chunks of ``STREAM_CHUNK`` bytes (the last one shorter)."""
        pending = bytearray()
        for piece in self._pieces():
            pending += piece
            while len(pending) >= STREAM_CHUNK:
                yield bytes(pending[:STREAM_CHUNK])
                del pending[:STREAM_CHUNK]
        if pending:
            yield bytes(pending)

    def close(self) -> None:
        self._files.close()

    def __enter__(self) -> EvidenceArchive:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def evidence_export(
    *,
    org: Org,
    window: EvidenceWindow,
    now: datetime | None = None,
    actor: Actor = OPERATOR,
) -> EvidenceArchive:
    """The evidence tar for ``org``'s receipts received within ``window``, built on disk
    (see the module docstring): every database read is done when this returns, and the
    export is in the org's audit trail (who, which window, how many receipts)."""
    now = now or timezone.now()
    with ExitStack() as files:

        def spool() -> _Spool:
            return _Spool(files.enter_context(tempfile.TemporaryFile()))

        receipts, chain, approvals, keys, sessions, records, manifest = (spool() for _ in range(7))
        session_data = files.enter_context(tempfile.TemporaryFile())
        with _snapshot():
            stored = mirror_head_get(org=org)
            size, head = stored.size, stored.head
            rows = _window_rows(org, window, size)
            seen = _write_receipts(receipts, rows)
            _write_json(
                chain,
                lambda entries: {"head": head, "size": size, "entries": entries, "next": None},
                _chain_entries(rows),
            )
            _write_json(approvals, lambda items: items, _approvals(org, rows))
            _write_json(keys, lambda items: items, _approver_keys(org))
            _write_json(sessions, lambda items: items, _session_index(rows, session_data, records))
        org_audit_record(
            org=org, kind=AuditKind.EVIDENCE_EXPORTED, actor=actor,
            summary=f"Exported evidence ({window.start or 'start'} to {window.end or 'now'}), "
            f"{seen.count} receipts",
            detail={
                "from": window.start.isoformat() if window.start else None,
                "to": window.end.isoformat() if window.end else None,
                "receipts": seen.count,
                "chain_size": size,
            },
        )  # fmt: skip
        verify_md = VERIFY_MD.format(
            org=org.slug,
            start=window.start or "the first receipt",
            end=window.end or "the export",
            generated=_iso(now),
        ).encode()
        fixed = {
            "receipts.jsonl": receipts,
            "chain.json": chain,
            "approvals.json": approvals,
            "approver_keys.json": keys,
            "sessions.json": sessions,
        }

        def manifest_files() -> Iterator[tuple[str, dict[str, Any]]]:
            for name, member in fixed.items():
                yield name, member.facts()
            records.file.seek(0)
            for line in records.file:
                name, _, facts = json.loads(line)
                yield name, facts
            yield (
                "VERIFY.md",
                {
                    "bytes": len(verify_md),
                    "sha256": hashlib.sha256(verify_md).hexdigest(),
                    "blake3": blake3(verify_md).hexdigest(),
                },
            )

        _write_json(
            manifest,
            lambda listed: {
                "org": org.slug,
                "generated_at": _iso(now),
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
        members = [
            _Member("manifest.json", manifest.file, manifest.offset, manifest.size),
            _Member("VERIFY.md", None, 0, len(verify_md), verify_md),
            *(
                _Member(name, member.file, member.offset, member.size)
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


def evidence_response(archive: EvidenceArchive, *, org: Org) -> StreamingHttpResponse:
    """The download of a built archive (the API and the console): streamed from disk, with
    its length; the response closes the archive when it is done."""
    response = StreamingHttpResponse(archive, content_type="application/x-tar")
    response["Content-Length"] = str(archive.size)
    response["Content-Disposition"] = f'attachment; filename="evidence-{org.slug}.tar"'
    return response
