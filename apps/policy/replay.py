"""Policy replay: the org's verified receipts of a window, decided again under a proposed
policy and under the current one, and which decisions flip, per rule.

Each mirrored action receipt carries the action the SDK gated (``content.action``).
Evaluating that action under both policies with the project's evaluator
(:func:`apps.policy.rules.evaluate`, the SDK's reading of policy.md §5) shows what a deploy
would change. Only evidence counts: each stored text is verified again
(:func:`apps.receipts.verifier.verify_receipt`, and its digest and action hash must be the
entry's); one that does not verify is left out and counted, and so is a retired body
(archived past retention: there is no action left to read).

The window is read newest first through the ``(org, received_at)`` index in keyset
batches (:func:`replay_window_rows`), so a replay's cost is the window's size, never the
org's. How large a window is comes from the analytics rollups (``window_receipts``), not
from counting the mirror: the rollups sit a floor above this app, so ``apps.analytics``
registers the count when it starts (:func:`window_count_register`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple, TypeVar

from django.db import connection, transaction

from apps.policy.rules import Decision, Policy, evaluate
from apps.receipts.mirror_chain import receipt_digest
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import RETIRED_BODY
from apps.receipts.verifier import verify_receipt
from apps.tenancy.models import Org

# Entries read per statement: one keyset page of the window.
REPLAY_BATCH = 500
# Example receipts kept per flip, and decision changes kept in ``sample`` (newest first).
EXAMPLES_PER_FLIP = 3
SAMPLE_SIZE = 20

Row = TypeVar("Row")

# The receipts ``org`` received on ``day`` (UTC) and after, by the rollups.
WindowCount = Callable[[Org, date], int]
_window_count: WindowCount | None = None


def window_count_register(count: WindowCount) -> None:
    """Install the window count (``apps.analytics`` at ready time)."""
    global _window_count
    _window_count = count


def window_receipts(*, org: Org, start: datetime) -> int:
    """How many receipts ``org`` received since ``start``, by whole days (an upper bound:
    the first day counts whole, lifecycle receipts count too)."""
    if _window_count is None:
        raise RuntimeError("no window count registered (apps.analytics is not installed)")
    return _window_count(org, start.date())


class WindowRow(NamedTuple):
    pk: int
    seq: int
    action_hash: str
    receipt: str
    receipt_digest: str
    kind: str
    superseded_by: str
    received_at: datetime


_ROW_FIELDS = WindowRow._fields


# A page's statement runs with every plan but an ordered read of the index switched off:
# told how many entries a range holds, the planner would rather read them all and sort (a
# bitmap scan; a sequential scan of the table when the range is most of an org), and
# parallel workers read ahead of the page. So does each batch of the replays' retention
# (``policy_replays_prune``): across orgs the planner takes row-level security to let a
# few rows through, and reads the whole backlog (or the table) to sort them. Local to the
# statement's transaction or savepoint (``read_in_index_order``).
_ORDERED_INDEX_READ = (
    "SELECT set_config('enable_seqscan', 'off', true), "
    "set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true), "
    "set_config('max_parallel_workers_per_gather', '0', true)"
)


def replay_window_rows(
    *, org: Org, start: datetime, end: datetime, batch: int = REPLAY_BATCH
) -> Iterator[WindowRow]:
    """``org``'s entries received in ``[start, end]``, newest first (by ``seq`` within an
    instant), ``batch`` per statement.

    Keyset pages on ``received_at``: each page is the newest ``batch`` entries (and one to
    look ahead) below the previous one, a backward range of the ``(org, received_at)``
    index that stops there (``_ORDERED_INDEX_READ``). A full page may cut an instant in two
    (entries received at the same moment): its last instant is then read whole by a
    statement of its own, an equality on the index."""
    window = MirrorEntry.objects.filter(org=org, received_at__gte=start)
    below: dict[str, datetime] = {"received_at__lte": end}
    while True:
        newest = window.filter(**below).order_by("-received_at")
        page = _page(newest.values_list(*_ROW_FIELDS)[: batch + 1])
        if len(page) <= batch:
            yield from page
            return
        last = page[batch - 1].received_at
        if page[batch].received_at == last:  # the instant goes on past the page
            instant = window.filter(received_at=last).values_list(*_ROW_FIELDS)
            page = [row for row in page if row.received_at > last] + _page(instant)
        else:
            page = page[:batch]
        yield from page
        below = {"received_at__lt": last}


def read_in_index_order(rows: Iterable[Row]) -> list[Row]:
    """``rows`` (a query ordered as an index is, and limited) read under
    ``_ORDERED_INDEX_READ``: the index walked in order, stopped at the limit."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_ORDERED_INDEX_READ)
        read = list(rows)
        transaction.set_rollback(True)  # a read: rolling back only ends the settings
    return read


def _page(rows: Iterable[tuple[Any, ...]]) -> list[WindowRow]:
    """``rows`` read in the index's order, newest first."""
    read = [WindowRow(*row) for row in read_in_index_order(rows)]
    return sorted(read, key=lambda row: (row.received_at, row.seq), reverse=True)


@dataclass(frozen=True)
class Example:
    """A receipt whose decision flips, as the report links it."""

    pk: int
    seq: int
    action_hash: str
    verb: str
    workflow: str
    tool_name: str


@dataclass
class Flip:
    """Decisions that flip the same way through the same pair of rules."""

    current_rule_id: str
    current_decision: str
    proposed_rule_id: str
    proposed_decision: str
    count: int = 0
    examples: list[Example] = field(default_factory=list)

    @property
    def transition(self) -> str:
        return f"{self.current_decision} -> {self.proposed_decision}"


@dataclass(frozen=True)
class DecisionChange:
    seq: int
    action_hash: str
    verb: str
    workflow: str
    before_decision: str
    before_rule_id: str
    after_decision: str
    after_rule_id: str


@dataclass
class ReplayReport:
    """What a replay found. ``considered`` counts the verified action receipts replayed;
    the others in the window are counted by why they were left out."""

    considered: int = 0
    unchanged: int = 0
    changed: int = 0
    rule_only_changed: int = 0  # same decision, reached through another rule
    not_verified: int = 0  # the stored text no longer verifies as this entry's receipt
    retired: int = 0  # body archived past retention: not replayable
    not_actions: int = 0  # lifecycle receipts (suspended, approved, ...): no gate to replay
    superseded: int = 0  # an L0 receipt whose L1 form is in the mirror: counted once
    recorded_differs: int = 0  # the receipt recorded another decision than the current policy
    truncated: bool = False  # the window holds more receipts than one replay reads
    covered_from: str | None = None  # when the oldest receipt read was received (RFC 3339)
    transitions: Counter[str] = field(default_factory=Counter)  # "allow -> block": n
    flips: list[Flip] = field(default_factory=list)  # most receipts first
    sample: list[DecisionChange] = field(default_factory=list)

    @property
    def not_replayable(self) -> int:
        return self.not_verified + self.retired

    def as_dict(self) -> dict[str, Any]:
        stored = asdict(self)
        stored["transitions"] = dict(self.transitions.most_common())
        return stored

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> ReplayReport:
        values = dict(stored)
        values["transitions"] = Counter(values.get("transitions", {}))
        values["flips"] = [
            Flip(**{**flip, "examples": [Example(**example) for example in flip["examples"]]})
            for flip in values.get("flips", [])
        ]
        values["sample"] = [DecisionChange(**change) for change in values.get("sample", [])]
        return cls(**values)


def _verified_content(row: WindowRow) -> Mapping[str, Any] | None:
    """The receipt's content when its stored text verifies as this entry's receipt."""
    if receipt_digest(row.receipt) != row.receipt_digest:
        return None
    verdict = verify_receipt(row.receipt)
    if not verdict.is_valid or verdict.receipt is None:
        return None
    if verdict.receipt.action_hash != row.action_hash:
        return None
    return verdict.receipt.content


def policy_replay_compute(
    *,
    org: Org,
    proposed: Policy,
    current: Policy,
    start: datetime,
    end: datetime,
    limit: int,
) -> ReplayReport:
    """Replay ``org``'s receipts received in ``[start, end]`` (the newest ``limit`` of them)
    under ``current`` and ``proposed``; see the module doc."""
    report = ReplayReport()
    flips: dict[tuple[str, str, str, str], Flip] = {}
    for index, row in enumerate(replay_window_rows(org=org, start=start, end=end)):
        if index == limit:
            report.truncated = True
            break
        report.covered_from = row.received_at.isoformat()
        if row.receipt == RETIRED_BODY:
            report.retired += 1
            continue
        if row.kind != "action":
            report.not_actions += 1
            continue
        if row.superseded_by:
            report.superseded += 1
            continue
        content = _verified_content(row)
        if content is None:
            report.not_verified += 1
            continue
        action = content.get("action")
        if not isinstance(action, dict):  # the schema requires it: never for a valid receipt
            report.not_verified += 1
            continue
        _replay_one(report, flips, row, action, _recorded_decision(content), current, proposed)
    report.flips = sorted(
        flips.values(), key=lambda flip: (-flip.count, flip.current_rule_id, flip.proposed_rule_id)
    )
    return report


def _replay_one(
    report: ReplayReport,
    flips: dict[tuple[str, str, str, str], Flip],
    row: WindowRow,
    action: Mapping[str, object],
    recorded: str | None,
    current: Policy,
    proposed: Policy,
) -> None:
    before: Decision = evaluate(current, action)
    after: Decision = evaluate(proposed, action)
    report.considered += 1
    if recorded is not None and recorded != before.decision_path:
        report.recorded_differs += 1
    if after.decision_path == before.decision_path:
        report.unchanged += 1
        report.rule_only_changed += after.rule_id != before.rule_id
        return
    report.changed += 1
    report.transitions[f"{before.decision_path} -> {after.decision_path}"] += 1
    key = (before.rule_id, before.decision_path, after.rule_id, after.decision_path)
    flip = flips.get(key)
    if flip is None:
        flip = flips[key] = Flip(*key)
    flip.count += 1
    verb, workflow = str(action.get("verb", "")), str(action.get("workflow", ""))
    if len(flip.examples) < EXAMPLES_PER_FLIP:
        flip.examples.append(
            Example(row.pk, row.seq, row.action_hash, verb, workflow,
                    str(action.get("tool_name", "")))
        )  # fmt: skip
    if len(report.sample) < SAMPLE_SIZE:
        report.sample.append(
            DecisionChange(
                seq=row.seq,
                action_hash=row.action_hash,
                verb=verb,
                workflow=workflow,
                before_decision=before.decision_path,
                before_rule_id=before.rule_id,
                after_decision=after.decision_path,
                after_rule_id=after.rule_id,
            )
        )


def _recorded_decision(content: Mapping[str, Any]) -> str | None:
    """The decision the receipt itself recorded (``content.policy.decision_path``)."""
    recorded = content.get("policy")
    decision = recorded.get("decision_path") if isinstance(recorded, dict) else None
    return decision if isinstance(decision, str) else None
