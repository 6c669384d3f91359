"""The replay engine (apps.policy.replay) and the service a policy proposal calls
(``policy_replay_request``): counts checked by hand on the receipts the real heso SDK
minted (tests/data/sdk/corpus.json), the keyset read of the window, what is left out."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

from django.utils import timezone
from nacl.signing import SigningKey

from apps.analytics.selectors import receipts_received_since
from apps.analytics.services import rollups_fold_org
from apps.policy.models import ReplayStatus
from apps.policy.replay import (
    ReplayReport,
    policy_replay_compute,
    replay_window_rows,
    window_receipts,
)
from apps.policy.rules import load_policy
from apps.policy.selectors import policy_replay_report
from apps.policy.services import policy_deploy, policy_replay_request
from apps.receipts.models import MirrorEntry
from tests.interop.corpus import CORPUS, KeyScopedRoute, all_flow_receipts, push_flow
from tests.policy.test_policy_api import ALLOW_SEARCH, BLOCK_SEARCH
from tests.receipts.factories import Agent
from tests.receipts.model_factories import MirrorEntryFactory

# The corpus policy with three changes: tool calls lose their allow rule (they fall to the
# default), HTTP requests are blocked before the status-page rule, and payments above 2,000
# are blocked before the large-payment approval.
CORPUS_POLICY: str = CORPUS["policy_toml"]
TOOL_ALLOW = """[[rule]]
id = "tool.allow"
order = 20
enabled = true
subject = { kind = "any" }
verb = "tool_call"
scope = "*"
decision = "allow"
"""
PROPOSED = (
    CORPUS_POLICY.replace(TOOL_ALLOW, "")
    + """
[[rule]]
id = "http.block"
order = 5
enabled = true
subject = { kind = "any" }
verb = "http_request"
scope = "*"
decision = "block"

[[rule]]
id = "payment.huge.block"
order = 35
enabled = true
subject = { kind = "any" }
verb = "payment"
scope = "*"
decision = "block"
conditions = [{ field = "amount", op = "gt", value = 2000 }]
"""
)


def test_the_sdk_corpus_replays_to_the_hand_computed_flips(cast) -> None:
    assert TOOL_ALLOW in CORPUS_POLICY
    policy_deploy(org=cast.acme, toml=CORPUS_POLICY)
    route = KeyScopedRoute(cast.acme_key.secret)
    for flow in CORPUS["flows"]:
        push_flow(route, flow["name"])

    replay = policy_replay_request(org=cast.acme, toml=PROPOSED, days=7)

    assert replay.status == ReplayStatus.READY
    report = policy_replay_report(replay)
    assert report is not None
    # By hand, from the corpus notes: 16 action receipts and 10 lifecycle links (the four
    # gated flows: suspended, then approved/denied/expired, then completed where approved).
    #   11 tool_call (decorator_allow 1, redaction 2, result_bound 2, error 2, session 4):
    #      none has fields.env = "prod", so the active policy allows them by tool.allow;
    #      the proposal has no rule for them: the default routes them to a human.
    #    1 http_request to status.example.com: http.status.allow (its transfer_out effect
    #      is classified, so no floor applies); the proposal blocks it first (http.block).
    #    1 payment of 2500: payment.large.requires_approval; the proposal blocks it first.
    #    1 payment of 40: no rule in either: the default, both times.
    #    2 llm_call: llm.allow in both.
    assert (report.considered, report.changed, report.unchanged) == (16, 13, 3)
    assert (report.not_actions, report.not_verified, report.retired, report.superseded) == (
        10, 0, 0, 0,
    )  # fmt: skip
    assert report.rule_only_changed == 0
    assert report.recorded_differs == 0  # the SDK decided under the same policy
    assert dict(report.transitions) == {
        "allow -> require_approval": 11,
        "allow -> block": 1,
        "require_approval -> block": 1,
    }
    flips = [
        (f.current_rule_id, f.current_decision, f.proposed_rule_id, f.proposed_decision, f.count)
        for f in report.flips
    ]
    assert flips == [
        ("tool.allow", "allow", "policy.default.deny_unknown", "require_approval", 11),
        ("http.status.allow", "allow", "http.block", "block", 1),
        ("payment.large.requires_approval", "require_approval", "payment.huge.block", "block", 1),
    ]
    # The examples of a flip are its newest receipts, three at most.
    tool_calls = [
        pushed.action_hash
        for pushed in all_flow_receipts()
        if pushed.kind == "action" and pushed.receipt["content"]["action"]["verb"] == "tool_call"
    ]
    newest = [MirrorEntry.objects.get(org=cast.acme, action_hash=h) for h in tool_calls[-3:]]
    examples = report.flips[0].examples
    assert [(e.seq, e.pk) for e in examples] == [(e.seq, e.pk) for e in reversed(newest)]
    assert examples[0].tool_name == "get_weather"


def test_the_report_survives_its_storage(cast, push) -> None:
    policy_deploy(org=cast.acme, toml=ALLOW_SEARCH)
    assert push(Agent().receipt()).status_code == HTTPStatus.CREATED
    replay = policy_replay_request(org=cast.acme, toml=BLOCK_SEARCH, days=1)
    replay.refresh_from_db()
    report = policy_replay_report(replay)
    assert report is not None
    assert ReplayReport.from_dict(report.as_dict()) == report
    assert report.flips[0].examples[0].seq == 1
    assert report.sample[0].after_rule_id == "search.block"


def test_the_window_is_read_in_keyset_pages_across_receipts_of_the_same_instant(cast) -> None:
    instant = timezone.now() - timedelta(hours=1)
    for _ in range(5):
        MirrorEntryFactory(org=cast.acme, received_at=instant)
    MirrorEntryFactory(org=cast.acme)  # the newest
    MirrorEntryFactory(org=cast.acme, received_at=instant - timedelta(days=2))  # outside

    rows = list(
        replay_window_rows(
            org=cast.acme, start=instant - timedelta(days=1), end=timezone.now(), batch=2
        )
    )

    assert [row.seq for row in rows] == [6, 5, 4, 3, 2, 1]


def test_a_window_beyond_the_replay_limit_is_truncated_to_its_newest_receipts(cast) -> None:
    for _ in range(3):
        MirrorEntryFactory(org=cast.acme)
    second_newest = MirrorEntry.objects.get(org=cast.acme, seq=2).received_at
    empty = load_policy("").policy
    proposed = load_policy(BLOCK_SEARCH).policy
    assert empty is not None
    assert proposed is not None

    report = policy_replay_compute(
        org=cast.acme,
        proposed=proposed,
        current=empty,
        start=timezone.now() - timedelta(days=1),
        end=timezone.now(),
        limit=2,
    )

    assert (report.considered, report.truncated) == (2, True)
    assert report.covered_from == second_newest.isoformat()


def test_a_superseded_receipt_is_replayed_once_in_its_l1_form(cast, push) -> None:
    agent, approver_key = Agent(), SigningKey.generate()
    suspended = agent.receipt()
    assert push(suspended).status_code == HTTPStatus.CREATED
    approved = agent.approve_l1(suspended, approver_key)
    supersedes = suspended["content"]["action_hash"]
    assert push(approved, supersedes=supersedes).status_code == HTTPStatus.CREATED

    report = policy_replay_report(policy_replay_request(org=cast.acme, toml=BLOCK_SEARCH, days=1))

    assert report is not None
    assert (report.considered, report.superseded) == (1, 1)
    assert report.flips[0].examples[0].seq == 2


def test_the_window_is_sized_from_the_rollups(cast) -> None:
    for days_ago in (0, 0, 3, 10):
        MirrorEntryFactory(org=cast.acme, received_at=timezone.now() - timedelta(days=days_ago))
    MirrorEntryFactory(org=cast.globex)
    rollups_fold_org(org_id=cast.acme.pk, batch=3)  # three folded, one still past the cursor

    start = timezone.now() - timedelta(days=7)
    assert window_receipts(org=cast.acme, start=start) == 3
    assert receipts_received_since(org=cast.acme, day=start.date()) == 3
    assert window_receipts(org=cast.acme, start=timezone.now() - timedelta(days=30)) == 4
