"""What each member of an evidence export holds, read from the window's rows through
server-side cursors, one chunk at a time: the receipts as stored, the chain entries, the
agent sessions (with a chain file for each complete one), the approvals with their votes
and history, and the org's approver keys."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import IO, Any

from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import Combinable
from django.db.models.functions import Collate

from apps.approvals.models import Approval, ApproverKey
from apps.approvals.selectors import approval_roster
from apps.audit.archive import Spool, iso
from apps.audit.selectors import ENTRY_FIELDS
from apps.policy.models import PolicyProposal
from apps.policy.selectors import proposal_statement
from apps.policy.statement import POLICY_DEPLOY_SCOPE
from apps.receipts.models import MirrorEntry
from apps.receipts.verifier.chain import link_hash
from apps.tenancy.models import Org
from apps.transparency.selectors import receipt_proofs

# Rows per server-side cursor fetch: a receipt is a few KB, so about a megabyte in flight.
CURSOR_ROWS = 500
# Approvals per fetch: each comes as a model with its votes and events prefetched (several
# KB of objects), so fewer at a time.
APPROVAL_ROWS = 50


# A receipt's body from its row: the stored text, or a retired entry's archived one
# (``apps.audit.retired.ArchivedBodies.body``); ``(seq, stored text) -> body``.
Body = Callable[[int, str], str]


def stored_body(seq: int, text: str) -> str:
    return text


@dataclass
class Receipts:
    count: int = 0
    first_seq: int | None = None
    last_seq: int | None = None


def write_receipts(spool: Spool, rows: QuerySet[MirrorEntry], body: Body = stored_body) -> Receipts:
    seen = Receipts()
    ordered = rows.order_by("seq").values_list("seq", "receipt")
    for seq, receipt in ordered.iterator(chunk_size=CURSOR_ROWS):
        spool.write(body(seq, receipt) + "\n")
        seen.count += 1
        seen.first_seq = seq if seen.first_seq is None else seen.first_seq
        seen.last_seq = seq
    return seen


def write_proofs(spool: Spool, org: Org, rows: QuerySet[MirrorEntry]) -> None:
    """``proofs.jsonl``: each entry's transparency proof object (transparency.md §5.1)
    against the latest checkpoint, a line in seq order, each a ``verify_transparency
    --jsonl`` check as it stands (the log's origin, no witness required: an auditor puts
    the origin and witnesses they trust). ProofPending when a receipt is not in a published
    checkpoint yet."""
    ordered = rows.order_by("seq").values_list("seq", "action_hash")
    for seq, action_hash, proof in receipt_proofs(
        org=org, entries=ordered.iterator(chunk_size=CURSOR_ROWS)
    ):
        line = {
            "op": "verify_proof", "seq": seq, "action_hash": action_hash,
            "origin": proof["log_id"], "witness_keys": [], "required_cosignatures": 0,
            "proof": proof,
        }  # fmt: skip
        spool.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")


def chain_entries(
    rows: QuerySet[MirrorEntry], body: Body = stored_body
) -> Iterator[dict[str, Any]]:
    """The window's entries newest first, as ``GET /v1/audit/chain`` shows them (a retired
    entry with its archived body, as it was before it was retired)."""
    for entry in rows.order_by("-seq").values(*ENTRY_FIELDS).iterator(chunk_size=CURSOR_ROWS):
        entry["receipt"] = body(entry["seq"], entry["receipt"])
        entry["supersedes_action_hash"] = entry["supersedes_action_hash"] or None
        entry["superseded_by"] = entry["superseded_by"] or None
        entry["received_at"] = iso(entry["received_at"])
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


def session_index(
    rows: QuerySet[MirrorEntry], data: IO[bytes], records: Spool, body: Body = stored_body
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
        .values_list("session_id", "session_seq", "receipt", "seq")
        .iterator(chunk_size=CURSOR_ROWS)
    )
    for number, (session_id, session_rows) in enumerate(groupby(links, key=itemgetter(0)), start=1):
        spool = Spool(data)
        count, first_seq, last_seq, complete = 0, None, None, True
        waiting: list[list[str]] = []
        for seq, position_rows in groupby(session_rows, key=itemgetter(1)):
            forms = [body(row[3], row[2]) for row in position_rows]
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


# The window's approvals, oldest first, found from the window's entries: for each, its
# approval by the (org, action_hash) key. The LIMIT keeps the lookup a subquery run per entry
# (a lateral join PostgreSQL cannot turn around), so the read follows the window's size
# whatever the estimates say; joined the other way, it read every approval of the org and
# the window again for each of them.
_WINDOW_APPROVALS = (
    "SELECT a.id FROM ({window}) AS w CROSS JOIN LATERAL ("
    "SELECT a.id, a.created_at FROM approvals_approval a "
    "WHERE a.org_id = %s AND a.action_hash = w.action_hash LIMIT 1) AS a "
    "ORDER BY a.created_at, a.id"
)


def _window_approval_ids(org: Org, rows: QuerySet[MirrorEntry]) -> Iterator[list[int]]:
    """The ids of the window's approvals, oldest first, ``APPROVAL_ROWS`` at a time, read
    through a server-side cursor."""
    if connection.vendor != "postgresql":  # SQLite (local trial): the plain semi-join
        ids = (
            Approval.objects.filter(org=org, action_hash__in=rows.values("action_hash"))
            .order_by("created_at", "id")
            .values_list("id", flat=True)
        )
        chunk: list[int] = []
        for approval_id in ids.iterator(chunk_size=APPROVAL_ROWS):
            chunk.append(approval_id)
            if len(chunk) == APPROVAL_ROWS:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
        return
    window, params = rows.order_by().values("action_hash").query.sql_with_params()
    with connection.chunked_cursor() as cursor:
        cursor.execute(_WINDOW_APPROVALS.format(window=window), [*params, org.pk])
        while batch := cursor.fetchmany(APPROVAL_ROWS):
            yield [row[0] for row in batch]


def approvals(org: Org, rows: QuerySet[MirrorEntry]) -> Iterator[dict[str, Any]]:
    for ids in _window_approval_ids(org, rows):
        chunk = (
            Approval.objects.filter(pk__in=ids)
            .prefetch_related("votes", "events")
            .order_by("created_at", "id")
        )
        yield from _approval_items(chunk)


def _approval_items(approvals: QuerySet[Approval]) -> Iterator[dict[str, Any]]:
    for approval in approvals:
        item = {
            "approval_id": approval.approval_id,
            "action_hash": approval.action_hash,
            "status": approval.status,
            "threshold": approval.threshold,
            # Frozen at the first vote; before it, the keys eligible when exported.
            "roster": approval_roster(approval),
            "roster_frozen": approval.roster_frozen_at is not None,
            "rule_id": approval.rule_id,
            "created_at": iso(approval.created_at),
            "resolved_at": iso(approval.resolved_at),
            "votes": [
                {
                    "approver_public_key": vote.approver_public_key,
                    "decision": vote.decision,
                    "voted_at": iso(vote.voted_at),
                    "nonce": vote.nonce,
                    "leg": {"record": vote.record, "co_sig_b64": vote.co_sig_b64}
                    if vote.record
                    else None,
                    # A vote the explicit open set aside: kept, never counted.
                    **(
                        {
                            "set_aside_at": iso(vote.set_aside_at),
                            "set_aside_reason": vote.set_aside_reason,
                        }
                        if vote.set_aside_at
                        else {}
                    ),
                }
                for vote in approval.votes.all()
            ],
            "history": [
                {"kind": event.kind, "at": iso(event.at), "detail": event.detail}
                for event in approval.events.all()
            ],
        }
        # Prefetching ties each vote and event back to its approval: a reference cycle per
        # approval, which only the cycle collector frees, so garbage would grow with the
        # window. Dropping the prefetched rows breaks it.
        approval._prefetched_objects_cache.clear()  # type: ignore[attr-defined]
        yield item


def approver_keys(org: Org) -> Iterator[dict[str, Any]]:
    keys = ApproverKey.objects.filter(org=org).order_by("created_at", "id")
    for key in keys.iterator(chunk_size=CURSOR_ROWS):
        yield {
            "key_id": key.key_id,
            "public_key": key.public_key,
            "label": key.label,
            "registered_at": iso(key.created_at),
            "revoked_at": iso(key.revoked_at),
        }


def policy_approvals(org: Org) -> Iterator[dict[str, Any]]:
    """The org's co-signed policy changes, each with the statement its approvers signed
    and every vote's token as submitted: who approved which policy, checkable offline
    (approvals.md §1-§3 over the statement's RFC 8785 bytes, scope ``policy:deploy``)."""
    proposals = (
        PolicyProposal.objects.filter(org=org)
        .select_related("org", "version", "previous_version", "deployment")
        .prefetch_related("votes")
        .order_by("created_at", "id")
    )
    for proposal in proposals.iterator(chunk_size=APPROVAL_ROWS):
        item = {
            "policy_id": proposal.version.policy_id,
            "policy_hash": proposal.version.policy_hash,
            "status": proposal.status,
            "quorum": proposal.quorum,
            "scope": POLICY_DEPLOY_SCOPE,
            "statement": proposal_statement(proposal),
            "roster": proposal.roster,
            "proposed_by": proposal.proposed_by_name,
            "proposed_at": iso(proposal.created_at),
            "activated_at": iso(proposal.deployment.deployed_at) if proposal.deployment else None,
            "break_glass": {
                "reason": proposal.break_glass_reason,
                "at": iso(proposal.break_glass_at),
                "approved_after": iso(proposal.ratified_at),
            }
            if proposal.break_glass_at
            else None,
            "votes": [
                {
                    "approver_public_key": vote.approver_public_key,
                    "key_id": vote.approver_key_id,
                    "decision": vote.decision,
                    "voted_at": iso(vote.voted_at),
                    "token_b64": vote.token_b64,
                }
                for vote in proposal.votes.all()
            ],
        }
        proposal._prefetched_objects_cache.clear()  # type: ignore[attr-defined]
        yield item
