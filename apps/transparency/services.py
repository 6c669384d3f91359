"""Writes of the transparency log: extending org trees, publishing epochs, witnesses and
their cosignatures (transparency.md §3, §4.5, §5.6, §9).

The push path is untouched: org trees are extended from the mirror's committed entries
(``org_trees_extend``), which each epoch run does first. Publication is one transaction
under the log state's row lock: an epoch's leaves, heads and checkpoint become visible
together or not at all, and a crash mid-run publishes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.common import outbound
from apps.common.errors import InvalidInput
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.tenancy.org_context import activate_all_orgs, activate_default
from apps.transparency.bulk import (
    org_logs_published,
    org_nodes_insert,
    org_trees_update,
    top_nodes_insert,
)
from apps.transparency.errors import (
    CheckpointNotFound,
    CosignatureInvalid,
    OriginChanged,
    WitnessInvalid,
    WitnessUnknown,
)
from apps.transparency.models import (
    Checkpoint,
    Cosignature,
    LogState,
    OrgLog,
    TopLeaf,
    Witness,
)
from apps.transparency.storage import MissingNode, org_node_reader, top_node_reader
from apps.transparency.tree.merkle import (
    append_hashes,
    frontier_nodes,
    leaf_hash,
    root_of_frontier,
)
from apps.transparency.tree.note import (
    MAX_TIMESTAMP,
    NoteError,
    b64decode_strict,
    checkpoint_body,
    cosignature_verifies,
    is_valid_key_name,
    is_valid_origin,
    org_head_leaf,
    parse_cosignature_line,
    parse_vkey,
    vkey_of,
)

EXTEND_CHUNK = 10_000  # entries per org per transaction
ORGS_PER_BATCH = 500
BULK_BATCH = 5_000
COSIGNATURE_MAX_FUTURE_SECONDS = 300


@contextmanager
def every_org() -> Iterator[None]:
    """The publisher reads and writes across orgs (as operator commands do)."""
    activate_all_orgs()
    try:
        yield
    finally:
        activate_default()


# -- org trees ---------------------------------------------------------------------------


def org_log_ensure(*, org_pk: int) -> OrgLog:
    log, _ = OrgLog.objects.get_or_create(org_id=org_pk)
    return log


def _new_entries(starts: dict[int, int], limit: int) -> dict[int, list[bytes]]:
    """Per org, the leaf hashes of its entries ``start+1 …`` (at most ``limit``), stopping
    at the first ``seq`` not committed yet (the next run takes it)."""
    rows: list[tuple[int, int, str]]
    if connection.vendor == "postgresql":
        pairs = sorted(starts.items())
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT e.org_id, e.seq, e.action_hash "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS w(org_id, size) "
                "JOIN receipts_mirrorentry e ON e.org_id = w.org_id "
                "AND e.seq > w.size AND e.seq <= w.size + %s ORDER BY e.org_id, e.seq",
                [[org for org, _ in pairs], [size for _, size in pairs], limit],
            )
            rows = list(cursor.fetchall())
    else:
        rows = [
            (org_pk, seq, action_hash)
            for org_pk, start in sorted(starts.items())
            for seq, action_hash in MirrorEntry.objects.filter(
                org_id=org_pk, seq__gt=start, seq__lte=start + limit
            )
            .order_by("seq")
            .values_list("seq", "action_hash")
        ]
    found: dict[int, list[bytes]] = {}
    for org_pk, seq, action_hash in rows:
        hashes = found.setdefault(org_pk, [])
        if seq == starts[org_pk] + len(hashes) + 1:
            hashes.append(leaf_hash(bytes.fromhex(action_hash)))
    return found


def _frontiers(starts: dict[int, int]) -> dict[int, dict[tuple[int, int], bytes]]:
    """Per org, the stored perfect subtrees its next leaves hang on."""
    wanted = [
        (org_pk, level, index)
        for org_pk, start in starts.items()
        for level, index in frontier_nodes(start)
    ]
    found: dict[int, dict[tuple[int, int], bytes]] = {org_pk: {} for org_pk in starts}
    if not wanted:
        return found
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n.org_id, n.level, n.index, n.hash FROM "
                "unnest(%s::bigint[], %s::smallint[], %s::bigint[]) AS w(org_id, level, index) "
                "JOIN transparency_orgtreenode n ON n.org_id = w.org_id "
                "AND n.level = w.level AND n.index = w.index",
                [[w[0] for w in wanted], [w[1] for w in wanted], [w[2] for w in wanted]],
            )
            rows = list(cursor.fetchall())
    else:
        rows = [
            (org_pk, level, index, value)
            for org_pk, start in starts.items()
            for (level, index), value in org_node_reader(org_pk)(set(frontier_nodes(start))).items()
        ]
    for org_pk, level, index, value in rows:
        found[org_pk][(level, index)] = bytes(value)
    for org_pk, start in starts.items():
        if len(found[org_pk]) != len(frontier_nodes(start)):
            raise MissingNode(f"org {org_pk}: a frontier node of its stored tree is missing")
    return found


def _extend_batch(org_pks: list[int]) -> tuple[int, list[int]]:
    """One transaction: extend these orgs' trees by at most EXTEND_CHUNK entries each.
    Returns the entries added and the orgs that may have more."""
    with transaction.atomic():
        logs = {
            log.org_id: log
            for log in OrgLog.objects.select_for_update().filter(org_id__in=org_pks).order_by("pk")
        }
        starts = {org_pk: log.tree_size for org_pk, log in logs.items()}
        entries = _new_entries(starts, EXTEND_CHUNK)
        if not entries:
            return 0, []
        frontiers = _frontiers({org_pk: starts[org_pk] for org_pk in entries})
        nodes: list[tuple[int, int, int, bytes]] = []
        trees: list[tuple[int, int, bytes]] = []
        for org_pk, hashes in entries.items():
            created, edge, size = append_hashes(starts[org_pk], frontiers[org_pk], hashes)
            nodes.extend((org_pk, level, index, value) for level, index, value in created)
            trees.append((org_pk, size, root_of_frontier(edge)))
        org_nodes_insert(nodes)
        org_trees_update(trees)
        more = [org_pk for org_pk, hashes in entries.items() if len(hashes) == EXTEND_CHUNK]
        return sum(len(hashes) for hashes in entries.values()), more


def org_tree_extend(*, org_pk: int) -> int:
    """Append the org's committed mirror entries past its stored tree size, in ``seq``
    order; each chunk commits with the size it completes. Returns the entries added."""
    org_log_ensure(org_pk=org_pk)
    added, more = _extend_batch([org_pk])
    while more:
        step, more = _extend_batch(more)
        added += step
    return added


def org_trees_extend() -> int:
    """Extend every org tree that lags its mirror head, ORGS_PER_BATCH orgs a transaction
    (each batch commits the nodes with the sizes they complete). Returns the entries added."""
    with every_org():
        heads = dict(MirrorHead.objects.filter(size__gt=0).values_list("org_id", "size"))
        stored = dict(OrgLog.objects.values_list("org_id", "tree_size"))
        for org_pk in heads.keys() - stored.keys():
            org_log_ensure(org_pk=org_pk)
        lagging = sorted(org_pk for org_pk, size in heads.items() if size > stored.get(org_pk, 0))
        added = 0
        while lagging:
            batch, lagging = lagging[:ORGS_PER_BATCH], lagging[ORGS_PER_BATCH:]
            step, more = _extend_batch(batch)
            added += step
            lagging = sorted(set(lagging) | set(more))
        return added


# -- epochs ------------------------------------------------------------------------------


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


# -- witnesses ---------------------------------------------------------------------------


@dataclass(frozen=True)
class WitnessRegistration:
    witness: Witness
    status: str  # registered | unchanged | rotated | deactivated

    def as_dict(self) -> dict[str, str]:
        return {
            "name": self.witness.name,
            "key_id": self.witness.key_id,
            "vkey": self.witness.vkey,
            "status": self.status,
        }


def _witness_key(name: str, key: str) -> bytes:
    if not is_valid_key_name(name) or len(name.encode("utf-8")) > 255:
        raise WitnessInvalid(
            "a witness name is non-empty, at most 255 bytes, without whitespace or '+'"
        )
    if name == settings.TRANSPARENCY_ORIGIN:
        raise WitnessInvalid("a witness name must differ from the log's origin")
    raw = b64decode_strict(key)
    if raw is not None and len(raw) == 32:
        return raw
    try:
        parsed = parse_vkey(key)
    except NoteError as error:
        raise WitnessInvalid(
            f"the key is neither b64 of a 32-byte Ed25519 key nor a vkey: {error}"
        ) from error
    if parsed.name != name:
        raise WitnessInvalid(f"the vkey names {parsed.name!r}, not {name!r}")
    return parsed.public_key


@transaction.atomic
def witness_register(*, name: str, key: str, deactivate: bool = False) -> WitnessRegistration:
    """Register (or rotate to, or deactivate) a witness key (§4.5, §9)."""
    public_key = _witness_key(name, key)
    vkey = vkey_of(name, public_key)
    now = timezone.now()
    existing = Witness.objects.select_for_update().filter(vkey=vkey).first()
    if deactivate:
        if existing is None:
            raise WitnessInvalid(f"no registered witness key {vkey}")
        if existing.active:
            existing.active = False
            existing.deactivated_at = now
            existing.save(update_fields=["active", "deactivated_at"])
        return WitnessRegistration(witness=existing, status="deactivated")
    if existing is not None and existing.active:
        return WitnessRegistration(witness=existing, status="unchanged")
    others = Witness.objects.select_for_update().filter(name=name, active=True)
    rotated = others.exclude(vkey=vkey).update(active=False, deactivated_at=now) > 0
    if existing is None:
        existing = Witness.objects.create(
            name=name, public_key=public_key, key_id=parse_vkey(vkey).key_id.hex(), vkey=vkey
        )
    else:
        existing.active = True
        existing.deactivated_at = None
        existing.save(update_fields=["active", "deactivated_at"])
    return WitnessRegistration(witness=existing, status="rotated" if rotated else "registered")


# -- cosignatures ------------------------------------------------------------------------


@dataclass(frozen=True)
class CosignatureResult:
    cosignature: Cosignature
    created: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "status": "accepted" if self.created else "duplicate",
            "checkpoint_size": self.cosignature.checkpoint.size,
            "witness": self.cosignature.witness.name,
            "key_id": self.cosignature.witness.key_id,
            "timestamp": self.cosignature.timestamp,
        }


def cosignature_submit(
    *, checkpoint_size: object, cosignature: object, now: datetime | None = None
) -> CosignatureResult:
    """§5.6, its checks in order; accepted only if it verifies over the stored body."""
    if not isinstance(checkpoint_size, int) or isinstance(checkpoint_size, bool):
        raise InvalidInput("checkpoint_size must be an integer >= 1")
    if checkpoint_size < 1:
        raise InvalidInput("checkpoint_size must be an integer >= 1")
    if not isinstance(cosignature, str):
        raise InvalidInput("cosignature must be a string (a cosignature/v1 line)")
    try:
        parsed = parse_cosignature_line(cosignature)
    except NoteError as error:
        raise CosignatureInvalid(f"not a cosignature line: {error}") from error
    witness = (
        Witness.objects.filter(name=parsed.name, key_id=parsed.key_id.hex(), active=True)
        .order_by("pk")
        .first()
    )
    if witness is None:
        raise WitnessUnknown(f"no active registered witness {parsed.name} {parsed.key_id.hex()}")
    checkpoint = (
        Checkpoint.objects.filter(size=checkpoint_size).first()
        if checkpoint_size <= MAX_TIMESTAMP  # the largest bigint
        else None
    )
    if checkpoint is None:
        raise CheckpointNotFound(f"no checkpoint of size {checkpoint_size}")
    moment = now or timezone.now()
    if parsed.timestamp > MAX_TIMESTAMP or (
        parsed.timestamp > moment.timestamp() + COSIGNATURE_MAX_FUTURE_SECONDS
    ):
        raise CosignatureInvalid("the cosignature's time is too far in the future")
    key = parse_vkey(witness.vkey)
    if not cosignature_verifies(key, parsed, checkpoint.body):
        raise CosignatureInvalid("the cosignature does not verify over the checkpoint's body")
    for _ in range(2):
        try:
            with transaction.atomic():
                stored = (
                    Cosignature.objects.select_for_update()
                    .filter(checkpoint=checkpoint, witness=witness)
                    .first()
                )
                if stored is None:
                    created = Cosignature.objects.create(
                        checkpoint=checkpoint,
                        witness=witness,
                        timestamp=parsed.timestamp,
                        line=parsed.line,
                        accepted_at=moment,
                    )
                    return CosignatureResult(cosignature=created, created=True)
                if parsed.timestamp > stored.timestamp:
                    stored.timestamp = parsed.timestamp
                    stored.line = parsed.line
                    stored.accepted_at = moment
                    stored.save(update_fields=["timestamp", "line", "accepted_at"])
                return CosignatureResult(cosignature=stored, created=False)
        except IntegrityError:
            continue  # a concurrent first submission won: read it as a duplicate
    raise CosignatureInvalid("the cosignature could not be stored; submit it again")


# -- alerts ------------------------------------------------------------------------------


def transparency_alerts_emit(*, alerts: list[str], log_url: str) -> int:
    """Record a ``transparency.alert`` event for each alert the monitor raised: for the org
    an alert names (by its log id), or for every org with a log when it is about the log as
    a whole. Returns the events emitted."""
    if not alerts:
        return 0
    now = timezone.now().isoformat().replace("+00:00", "Z")
    emitted = 0
    with every_org(), transaction.atomic():
        logs = dict(OrgLog.objects.values_list("log_id", "org_id"))
        for alert in alerts:
            payload: dict[str, Any] = {"alert": alert, "log": log_url, "observed_at": now}
            named = [org_id for log_id, org_id in logs.items() if log_id in alert]
            for org_id in named or logs.values():
                outbound.emit(org_id=org_id, event_type="transparency.alert", payload=payload.copy)
                emitted += 1
    return emitted
