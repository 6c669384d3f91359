"""The receipts the real heso 0.5.1 SDK minted (tests/data/sdk/corpus.json), on the mirror.

Every flow is pushed in order through the three routes (key-scoped, team-path single,
team-path batch). Lifecycle links are stored at the level the service derives, never the
one they claim (server.md §1): a ``heso.gated`` decision link is L1 only while its decision
key is an active approver key of the org, and never when the public placeholder key
signed it. The offline verifier derives L0 for every lifecycle kind and reports the claim.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from apps.approvals.content import ticket_hash
from apps.approvals.errors import AmbiguousTicket, ApproverKeyRefused
from apps.approvals.models import ApproverKey
from apps.approvals.selectors import approval_resolve
from apps.approvals.services import approver_key_register
from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from apps.receipts.verifier import verify_receipt
from apps.tenancy.models import Org
from tests.approvals.model_factories import ApproverKeyFactory
from tests.interop.corpus import (
    CORPUS,
    DECISION_KEY,
    DECISION_KINDS,
    GATED_FLOWS,
    PLACEHOLDER_FLOW,
    PLACEHOLDER_KEY,
    Answer,
    Pushed,
    Route,
    all_flow_receipts,
    decision_link,
    flow_receipts,
    json_lines,
    push_flow,
    register_decision_key,
    revoke_decision_key,
)
from tests.receipts.factories import as_text

pytestmark = pytest.mark.django_db

ALL_GATED_FLOWS = (*GATED_FLOWS, PLACEHOLDER_FLOW)


def answer_for(answers: list[Answer], pushed: Pushed) -> Answer:
    (answer,) = [answer for answer in answers if answer.action_hash == pushed.action_hash]
    return answer


def levels(answer: Answer) -> tuple[str, str | None]:
    return answer.trust_level, answer.claimed_trust_level


def stored_levels(org: Org, pushed: Pushed) -> tuple[str, str]:
    """The row's ``(trust_level, claimed_trust_level)``; an equal claim is stored as ""."""
    entry = MirrorEntry.objects.get(org=org, action_hash=pushed.action_hash)
    return entry.trust_level, entry.claimed_trust_level


def stored_chain(org: Org) -> list[tuple[int, str, str, str]]:
    return list(
        MirrorEntry.objects.filter(org=org)
        .order_by("seq")
        .values_list("seq", "action_hash", "trust_level", "claimed_trust_level")
    )


# --- 1. Every flow, in order, through every route ------------------------------------------


def put_decision_key(cast: Any, state: str) -> bool:
    """Bring the gated sessions' decision key into ``state`` before any push; whether it is
    then an active approver key of acme."""
    if state in ("registered", "registered then revoked"):
        register_decision_key(cast.acme)
    if state == "registered then revoked":
        revoke_decision_key(cast.acme)
    if state == "registered for globex only":
        register_decision_key(cast.globex)
    return state == "registered"


DECISION_KEY_STATES = (
    "unregistered",
    "registered",
    "registered then revoked",
    "registered for globex only",
)


@pytest.mark.parametrize("key_state", DECISION_KEY_STATES)
def test_every_corpus_flow_is_mirrored_in_order_at_the_level_the_service_derives(
    route: Route, cast, key_state
):
    active = put_decision_key(cast, key_state)
    corpus = all_flow_receipts()

    answers = [answer for flow in CORPUS["flows"] for answer in push_flow(route, flow["name"])]

    assert [answer.action_hash for answer in answers] == [p.action_hash for p in corpus]
    assert all(answer.new in (True, None) for answer in answers)  # none refused, none a duplicate
    assert [levels(answer) for answer in answers] == [
        (p.level(decision_key_active=active), p.claimed(decision_key_active=active)) for p in corpus
    ]
    if route.reports_seq:
        assert [answer.seq for answer in answers] == list(range(1, len(corpus) + 1))
    assert stored_chain(cast.acme) == [
        (
            seq,
            p.action_hash,
            p.level(decision_key_active=active),
            p.claimed(decision_key_active=active) or "",
        )
        for seq, p in enumerate(corpus, start=1)
    ]
    assert mirror_chain_check(org=cast.acme).ok


def test_every_link_of_every_gated_session_is_stored_decision_links_included(route: Route, cast):
    for flow in ALL_GATED_FLOWS:
        push_flow(route, flow)

    for flow in ALL_GATED_FLOWS:
        session = flow_receipts(flow)
        stored = MirrorEntry.objects.filter(org=cast.acme, session_id=session[0].note["session_id"])
        assert list(stored.order_by("session_seq").values_list("session_seq", "kind")) == [
            (p.note["seq"], p.kind) for p in session
        ]
    assert {decision_link(flow).kind for flow in GATED_FLOWS} == set(DECISION_KINDS)


def test_pushing_the_corpus_again_answers_each_receipt_with_its_stored_entry(route: Route, cast):
    first = [answer for flow in CORPUS["flows"] for answer in push_flow(route, flow["name"])]

    again = [answer for flow in CORPUS["flows"] for answer in push_flow(route, flow["name"])]

    assert all(answer.new in (False, None) for answer in again)
    assert [(a.action_hash, a.seq, levels(a)) for a in again] == [
        (a.action_hash, a.seq, levels(a)) for a in first
    ]
    assert MirrorEntry.objects.filter(org=cast.acme).count() == len(first)


# --- 2. Gated sessions: the derived level of a decision link --------------------------------


def assert_session_levels(
    cast: Any, answers: list[Answer], flow: str, link_levels: tuple[str, str | None]
) -> None:
    """The decision link is answered and stored at ``link_levels``; every other link of
    the session at L0 with no claim."""
    session = flow_receipts(flow)
    assert [answer.action_hash for answer in answers] == [p.action_hash for p in session]
    for pushed in session:
        expected = link_levels if pushed.kind in DECISION_KINDS else ("L0", None)
        assert levels(answer_for(answers, pushed)) == expected, pushed.kind
        assert stored_levels(cast.acme, pushed) == (expected[0], expected[1] or ""), pushed.kind


@pytest.mark.parametrize("flow", GATED_FLOWS)
def test_a_decision_link_whose_key_is_not_registered_is_stored_l0_with_its_l1_claim(
    route: Route, cast, flow
):
    assert decision_link(flow).claim == "L1"

    answers = push_flow(route, flow)

    assert_session_levels(cast, answers, flow, ("L0", "L1"))


@pytest.mark.parametrize("flow", GATED_FLOWS)
def test_a_decision_link_signed_by_a_registered_approver_key_is_stored_and_reported_l1(
    route: Route, cast, flow
):
    assert decision_link(flow).note["decision_signer"] == DECISION_KEY
    register_decision_key(cast.acme)

    answers = push_flow(route, flow)

    assert_session_levels(cast, answers, flow, ("L1", None))


@pytest.mark.parametrize("flow", GATED_FLOWS)
def test_a_decision_link_is_l0_again_once_its_key_is_revoked(route: Route, cast, flow):
    register_decision_key(cast.acme)
    revoke_decision_key(cast.acme)

    answers = push_flow(route, flow)

    assert_session_levels(cast, answers, flow, ("L0", "L1"))


def test_a_decision_key_registered_for_another_org_does_not_make_the_link_l1(route: Route, cast):
    register_decision_key(cast.globex)

    answers = push_flow(route, "gated_approved")

    assert_session_levels(cast, answers, "gated_approved", ("L0", "L1"))


def test_the_placeholder_signed_session_is_stored_l0_with_its_l1_claim(route: Route, cast):
    assert decision_link(PLACEHOLDER_FLOW).note["decision_signer"] == PLACEHOLDER_KEY
    register_decision_key(cast.acme)  # a registered decision key changes nothing for it

    answers = push_flow(route, PLACEHOLDER_FLOW)

    assert_session_levels(cast, answers, PLACEHOLDER_FLOW, ("L0", "L1"))


@pytest.mark.parametrize(
    "spelling",
    [PLACEHOLDER_KEY, PLACEHOLDER_KEY.rstrip("="), f"  {PLACEHOLDER_KEY}\n"],
    ids=["padded", "unpadded", "surrounded-by-whitespace"],
)
def test_the_placeholder_key_cannot_be_registered_as_an_approver_key(cast, spelling):
    with pytest.raises(ApproverKeyRefused, match="placeholder"):
        approver_key_register(org=cast.acme, public_key=spelling, key_id="placeholder")

    assert not ApproverKey.objects.filter(public_key=PLACEHOLDER_KEY).exists()


def test_a_placeholder_key_row_slipped_into_the_approver_keys_never_makes_a_link_l1(
    route: Route, cast
):
    # Not reachable through approver_key_register; a row written around it (admin, SQL)
    # must not count either (server.md §6).
    ApproverKeyFactory(org=cast.acme, key_id="slipped-in", public_key=PLACEHOLDER_KEY)

    answers = push_flow(route, PLACEHOLDER_FLOW)

    assert_session_levels(cast, answers, PLACEHOLDER_FLOW, ("L0", "L1"))


# --- 3. A duplicate answers what was stored --------------------------------------------------


def test_a_duplicate_decision_link_answers_its_stored_l0_after_the_key_is_registered(
    route: Route, cast
):
    link = decision_link("gated_approved")
    first = answer_for(push_flow(route, "gated_approved"), link)
    register_decision_key(cast.acme)

    again = answer_for(push_flow(route, "gated_approved"), link)

    assert levels(first) == levels(again) == ("L0", "L1")
    assert again.new in (False, None)
    assert again.seq == first.seq
    assert stored_levels(cast.acme, link) == ("L0", "L1")
    # The registration is in effect: a link pushed for the first time now is L1.
    fresh = answer_for(push_flow(route, "gated_denied"), decision_link("gated_denied"))
    assert levels(fresh) == ("L1", None)


def test_a_duplicate_decision_link_answers_its_stored_l1_after_the_key_is_revoked(
    route: Route, cast
):
    link = decision_link("gated_approved")
    register_decision_key(cast.acme)
    first = answer_for(push_flow(route, "gated_approved"), link)
    revoke_decision_key(cast.acme)

    again = answer_for(push_flow(route, "gated_approved"), link)

    assert levels(first) == levels(again) == ("L1", None)
    assert again.new in (False, None)
    assert again.seq == first.seq
    assert stored_levels(cast.acme, link) == ("L1", "")
    fresh = answer_for(push_flow(route, "gated_expired"), decision_link("gated_expired"))
    assert levels(fresh) == ("L0", "L1")


# --- 4. finalize_l1 / finalize_quorum supersede their suspended receipt (key-scoped) --------


@pytest.mark.parametrize("lane", ["single", "quorum"])
def test_a_corpus_l1_receipt_supersedes_its_suspended_receipt(push, cast, lane):
    case = CORPUS["l1"][lane]
    suspended, l1 = case["suspended"], case["l1"]
    old_hash, new_hash = suspended["content"]["action_hash"], l1["content"]["action_hash"]
    assert case["supersedes_action_hash"] == old_hash

    response = push(suspended)
    assert response.status_code == HTTPStatus.CREATED
    assert response.json() == {
        "status": "appended",
        "entry_hash": old_hash,
        "seq": 1,
        "trust_level": "L0",
    }
    # The push opened the approval provisionally; the SDK's ticket reaches it.
    approval = approval_resolve(org=cast.acme, ref=case["ticket"])
    assert approval is not None
    assert approval.action_hash == old_hash

    response = push(l1, supersedes=old_hash)

    assert response.status_code == HTTPStatus.CREATED, response.json()
    assert response.json() == {
        "status": "appended",
        "entry_hash": new_hash,
        "seq": 2,
        "trust_level": "L1",
    }
    old = MirrorEntry.objects.get(org=cast.acme, action_hash=old_hash)
    new = MirrorEntry.objects.get(org=cast.acme, action_hash=new_hash)
    assert (old.trust_level, old.superseded_by) == ("L0", new_hash)
    assert (new.trust_level, new.claimed_trust_level) == ("L1", "")
    assert new.supersedes_action_hash == old_hash
    assert mirror_chain_check(org=cast.acme).ok


# --- 5. Suspend tickets ---------------------------------------------------------------------


def corpus_tickets() -> list[Any]:
    """Every (suspended receipt, ticket the SDK handed its user) pair of the corpus."""
    cases = [
        pytest.param(entry["receipt"], entry["ticket"], id=f"{i}: {entry['source']}")
        for i, entry in enumerate(CORPUS["tickets"])
    ]
    for lane, case in CORPUS["l1"].items():
        cases.append(pytest.param(case["suspended"], case["ticket"], id=f"l1 {lane}"))
    return cases


@pytest.mark.parametrize(("receipt", "ticket"), corpus_tickets())
def test_the_service_reproduces_the_suspend_ticket_the_sdk_handed_its_user(receipt, ticket):
    verdict = verify_receipt(as_text(receipt))
    assert verdict.is_valid
    assert verdict.receipt is not None

    assert ticket_hash(receipt["content"]) == ticket
    assert ticket_hash(verdict.receipt.content) == ticket  # the content as the mirror holds it
    assert ticket != receipt["content"]["action_hash"]


def test_two_operators_suspending_the_same_action_share_a_ticket_but_not_a_content_hash(push, cast):
    other_operator = CORPUS["other_operator"]["public_key"]
    (second,) = [t for t in CORPUS["tickets"] if t["operator_public_key"] == other_operator]
    first = next(
        t
        for t in CORPUS["tickets"]
        if t["ticket"] == second["ticket"] and t["operator_public_key"] != other_operator
    )
    contents = [first["receipt"]["content"], second["receipt"]["content"]]
    hashes = [content["action_hash"] for content in contents]

    assert hashes[0] != hashes[1]
    assert [content["agent_identity"] for content in contents] == [
        CORPUS["operator"]["public_key"],
        other_operator,
    ]
    assert [ticket_hash(content) for content in contents] == [second["ticket"]] * 2

    # Both suspensions mirrored in one org: the ticket alone no longer names one approval.
    for entry in (first, second):
        assert push(entry["receipt"]).status_code == HTTPStatus.CREATED
    with pytest.raises(AmbiguousTicket) as refused:
        approval_resolve(org=cast.acme, ref=second["ticket"])
    assert all(action_hash in refused.value.message for action_hash in hashes)
    by_content_hash = [approval_resolve(org=cast.acme, ref=h) for h in hashes]
    assert [approval.action_hash if approval else None for approval in by_content_hash] == hashes


# --- 6. Offline verification ----------------------------------------------------------------


def receipt_ids(pushed: Pushed) -> str:
    return f"{pushed.flow}-{pushed.note.get('seq', '')}-{pushed.kind}"


LIFECYCLE = [p for p in all_flow_receipts() if p.kind != "action"]
ACTIONS = [p for p in all_flow_receipts() if p.kind == "action"]


@pytest.mark.parametrize("pushed", LIFECYCLE, ids=receipt_ids)
def test_the_offline_verifier_derives_l0_for_a_lifecycle_receipt_and_reports_its_claim(pushed):
    verdict = verify_receipt(as_text(pushed.receipt))

    assert verdict.kind == "Valid"
    assert verdict.trust_level == "L0"
    assert verdict.claimed_trust_level == (pushed.claim if pushed.claim != "L0" else None)
    assert verdict.decision_signer == pushed.note["decision_signer"]


@pytest.mark.parametrize(
    "receipt",
    [pytest.param(p.receipt, id=receipt_ids(p)) for p in ACTIONS]
    + [pytest.param(CORPUS["l1"][lane]["l1"], id=f"l1-{lane}") for lane in ("single", "quorum")],
)
def test_the_offline_verifier_keeps_the_level_an_action_receipt_proves(receipt):
    verdict = verify_receipt(as_text(receipt))

    assert verdict.kind == "Valid"
    assert verdict.trust_level == receipt["content"]["trust_level"]
    assert verdict.claimed_trust_level is None


def verify_receipts(path: Any, *flags: str) -> list[dict[str, Any]]:
    """Run the command; a non-zero exit (a non-Valid line) fails the test with SystemExit."""
    out = StringIO()
    call_command("verify_receipts", str(path), *flags, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("flow", ALL_GATED_FLOWS)
def test_verify_receipts_reports_the_derived_l0_and_the_claim_of_each_gated_session_link(
    tmp_path, flow
):
    session = flow_receipts(flow)
    source = tmp_path / f"{flow}.jsonl"
    source.write_bytes(json_lines([p.receipt for p in session]))

    verdicts = verify_receipts(source)

    # server.md §1, last bullet: offline, every non-action kind is L0 and a differing
    # claim is reported as claimed_trust_level.
    assert verdicts == [
        {"kind": "Valid", "trust_level": "L0"}
        | ({"claimed_trust_level": p.claim} if p.claim != "L0" else {})
        for p in session
    ]
    assert any("claimed_trust_level" in verdict for verdict in verdicts)
