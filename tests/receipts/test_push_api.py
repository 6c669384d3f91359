"""POST /v1/receipts (key-scoped): verification, idempotency, chain, quota, supersede."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest

from apps.receipts.mirror_chain import EMPTY_CHAIN_HEAD, chain_hash, receipt_digest
from apps.receipts.models import MirrorEntry, MirrorHead
from apps.tenancy.services import org_set_limits
from tests.receipts.factories import as_text

pytestmark = pytest.mark.django_db


def test_it_appends_a_valid_receipt_with_201(push, agent, cast):
    receipt = agent.receipt()
    response = push(receipt)
    assert response.status_code == HTTPStatus.CREATED
    assert response.json() == {
        "status": "appended",
        "entry_hash": receipt["content"]["action_hash"],
        "seq": 1,
        "trust_level": "L0",
    }


def test_seq_counts_1_2_3_per_org(push, globex_push, agent):
    assert [push(agent.receipt()).json()["seq"] for _ in range(3)] == [1, 2, 3]
    assert globex_push(agent.receipt()).json()["seq"] == 1


def test_a_duplicate_push_returns_the_existing_entry_with_200_and_no_new_row(push, agent):
    receipt = agent.receipt()
    push(agent.receipt())
    first = push(receipt).json()
    again = push(receipt)
    assert again.status_code == HTTPStatus.OK
    assert again.json() == {**first, "status": "duplicate"}
    assert MirrorEntry.objects.filter(action_hash=receipt["content"]["action_hash"]).count() == 1


def test_the_same_receipt_in_two_orgs_is_two_entries(push, globex_push, agent):
    receipt = agent.receipt()
    assert push(receipt).status_code == HTTPStatus.CREATED
    assert globex_push(receipt).status_code == HTTPStatus.CREATED


def test_a_tampered_copy_of_a_mirrored_receipt_is_409_not_duplicate(push, agent):
    receipt = agent.receipt()
    push(receipt)
    receipt["content"]["action"]["fields"]["query"] = "tampered"
    response = push(receipt)
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json() == {"detail": "HashMismatch", "kind": "HashMismatch"}


def test_a_bad_signature_is_409_with_the_verdict(push, agent):
    receipt = agent.receipt()
    other = agent.receipt()
    receipt["signatures"][0]["signature"] = other["signatures"][0]["signature"]
    response = push(receipt)
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json() == {
        "detail": "InvalidSignature: signature verification failed",
        "kind": "InvalidSignature",
    }


def test_a_claimed_l1_without_an_approver_is_409(push, agent):
    response = push(agent.receipt(trust_level="L1"))
    assert response.status_code == HTTPStatus.CONFLICT
    assert response.json()["kind"] == "TrustLevelMismatch"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        "{}",
        '{"receipt": null}',
        '{"receipt": "x"}',
        '{"receipt": {"alg": "heso-action/v2+ed25519", "signatures": []}}',
        '{"receipt": {"alg": "heso-action/v2+ed25519", "content": [], "signatures": []}}',
        '{"receipt": {}, "receipt": {}}',
        '{"receipt": {"content": NaN}}',
    ],
)
def test_a_body_that_is_not_a_receipt_push_is_422(push, body):
    response = push.raw(body)
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert isinstance(response.json()["detail"], str)
    assert not MirrorEntry.objects.exists()


def test_a_receipt_with_a_repeated_member_is_malformed_422(push, agent):
    text = as_text(agent.receipt()).replace(
        '"trust_level":"L0"', '"trust_level":"L0","trust_level":"L0"'
    )
    response = push(text)
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json()["kind"] == "Malformed"


def test_a_non_json_content_type_is_422(push, agent):
    response = push.raw('{"receipt":' + as_text(agent.receipt()) + "}", content_type="text/plain")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_an_oversize_body_is_413_with_a_detail(push, agent, settings):
    settings.JSON_BODY_MAX_BYTES = 2048
    receipt = agent.receipt(action={**agent.content()["action"], "fields": {"blob": "x" * 4000}})
    response = push(receipt)
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert "detail" in response.json()


def test_supersedes_must_be_an_action_hash(push, agent):
    response = push(agent.receipt(), supersedes="not-a-hash")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY


def test_it_stores_the_receipt_canonical_with_its_verdict_key_and_time(push, agent, cast):
    receipt = agent.receipt()
    # Insignificant whitespace is accepted; the canonical form is stored.
    push(json.dumps(receipt, indent=2))
    entry = MirrorEntry.objects.get()
    assert json.loads(entry.receipt) == receipt
    assert entry.receipt == json.dumps(
        receipt, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert (entry.trust_level, entry.kind) == ("L0", "action")
    assert entry.api_key == cast.acme_key.api_key
    assert entry.received_at is not None


def test_every_entry_carries_the_chain_hash_of_server_md_3(push, agent, cast):
    for _ in range(3):
        push(agent.receipt())
    prev = EMPTY_CHAIN_HEAD
    for entry in MirrorEntry.objects.filter(org=cast.acme).order_by("seq"):
        assert entry.prev_chain_hash == prev
        assert entry.receipt_digest == receipt_digest(entry.receipt)
        assert entry.chain_hash == chain_hash(
            prev_chain_hash=prev,
            seq=entry.seq,
            action_hash=entry.action_hash,
            receipt_digest_hex=entry.receipt_digest,
        )
        prev = entry.chain_hash
    head = MirrorHead.objects.get(org=cast.acme)
    assert (head.size, head.head) == (3, prev)


class TestQuota:
    def test_a_full_month_answers_402_quota_exceeded(self, push, agent, cast):
        org_set_limits(org=cast.acme, monthly_receipt_cap=2)
        push(agent.receipt())
        push(agent.receipt())
        receipt = agent.receipt()
        response = push(receipt)
        assert response.status_code == HTTPStatus.PAYMENT_REQUIRED
        body = response.json()
        assert body["status"] == "quota_exceeded"
        assert body["entry_hash"] == receipt["content"]["action_hash"]
        assert "soft-cap of 2" in body["detail"]
        assert MirrorEntry.objects.filter(org=cast.acme).count() == 2

    def test_duplicates_still_answer_duplicate_when_the_cap_is_reached(self, push, agent, cast):
        org_set_limits(org=cast.acme, monthly_receipt_cap=1)
        receipt = agent.receipt()
        push(receipt)
        assert push(receipt).json()["status"] == "duplicate"

    def test_the_count_starts_again_in_a_new_month(self, push, agent, cast):
        org_set_limits(org=cast.acme, monthly_receipt_cap=1)
        push(agent.receipt())
        MirrorHead.objects.filter(org=cast.acme).update(month="2020-01")
        assert push(agent.receipt()).status_code == HTTPStatus.CREATED


class TestSupersede:
    def test_an_l1_supersedes_its_suspended_l0_and_marks_it(self, push, agent, approver_key):
        suspended = agent.receipt()
        push(suspended)
        approved = agent.approve_l1(suspended, approver_key)
        old_hash = suspended["content"]["action_hash"]
        response = push(approved, supersedes=old_hash)
        assert response.status_code == HTTPStatus.CREATED
        new_entry = MirrorEntry.objects.get(action_hash=approved["content"]["action_hash"])
        assert new_entry.supersedes_action_hash == old_hash
        assert new_entry.trust_level == "L1"
        old_entry = MirrorEntry.objects.get(action_hash=old_hash)
        assert old_entry.superseded_by == new_entry.action_hash
        assert json.loads(old_entry.receipt) == suspended  # marked, never rewritten

    @pytest.mark.parametrize("value", [2**53 + 1, 1.5e300, -(2**60), 0.1])
    def test_numbers_beyond_doubles_still_bind(self, push, agent, approver_key, value):
        content = agent.content()
        content["action"]["fields"]["big"] = value
        suspended = agent.sign(content)
        assert push(suspended).status_code == HTTPStatus.CREATED
        approved = agent.approve_l1(suspended, approver_key)
        response = push(approved, supersedes=suspended["content"]["action_hash"])
        assert response.status_code == HTTPStatus.CREATED, response.json()

    def test_re_pushing_the_same_supersede_is_a_duplicate(self, push, agent, approver_key):
        suspended = agent.receipt()
        push(suspended)
        approved = agent.approve_l1(suspended, approver_key)
        first = push(approved, supersedes=suspended["content"]["action_hash"]).json()
        again = push(approved, supersedes=suspended["content"]["action_hash"])
        assert again.status_code == HTTPStatus.OK
        assert again.json() == {**first, "status": "duplicate"}

    def test_an_unknown_target_is_404(self, push, agent, approver_key):
        suspended = agent.receipt()
        approved = agent.approve_l1(suspended, approver_key)
        response = push(approved, supersedes=suspended["content"]["action_hash"])
        assert response.status_code == HTTPStatus.NOT_FOUND
        assert not MirrorEntry.objects.exists()

    def test_another_orgs_entry_is_an_unknown_target(self, push, globex_push, agent, approver_key):
        suspended = agent.receipt()
        globex_push(suspended)
        approved = agent.approve_l1(suspended, approver_key)
        response = push(approved, supersedes=suspended["content"]["action_hash"])
        assert response.status_code == HTTPStatus.NOT_FOUND

    def test_a_target_already_superseded_is_409(self, push, agent, approver_key):
        suspended = agent.receipt()
        push(suspended)
        target = suspended["content"]["action_hash"]
        push(agent.approve_l1(suspended, approver_key), supersedes=target)
        other = agent.approve_l1(suspended, approver_key, reason="second opinion")
        response = push(other, supersedes=target)
        assert response.status_code == HTTPStatus.CONFLICT
        assert "already superseded" in response.json()["detail"]

    def test_an_l1_target_is_409(self, push, agent, approver_key):
        suspended = agent.receipt()
        l1 = agent.approve_l1(suspended, approver_key)
        push(l1)
        again = agent.approve_l1(suspended, approver_key, reason="again")
        response = push(again, supersedes=l1["content"]["action_hash"])
        assert response.status_code == HTTPStatus.CONFLICT

    def test_an_l0_superseding_receipt_is_409(self, push, agent):
        target = agent.receipt()
        push(target)
        response = push(agent.receipt(), supersedes=target["content"]["action_hash"])
        assert response.status_code == HTTPStatus.CONFLICT

    def test_an_l1_of_another_action_fails_the_binding_check(self, push, agent, approver_key):
        target = agent.receipt()
        push(target)
        unrelated = agent.approve_l1(agent.receipt(), approver_key)
        response = push(unrelated, supersedes=target["content"]["action_hash"])
        assert response.status_code == HTTPStatus.CONFLICT
        assert "not the approved form" in response.json()["detail"]
        assert MirrorEntry.objects.count() == 1


class TestSessionContinuity:
    def test_a_linked_session_is_accepted(self, push, agent):
        for receipt in agent.session("s-1", 3):
            assert push(receipt).status_code == HTTPStatus.CREATED

    def test_a_gap_is_not_an_error(self, push, agent):
        chain = agent.session("s-1", 3)
        push(chain[0])
        assert push(chain[2]).status_code == HTTPStatus.CREATED

    def test_a_different_receipt_at_a_mirrored_position_is_a_fork_409(self, push, agent):
        push(agent.session("s-1", 1)[0])
        fork = agent.session("s-1", 1)[0]
        response = push(fork)
        assert response.status_code == HTTPStatus.CONFLICT
        assert "fork" in response.json()["detail"]

    def test_a_link_that_misses_the_mirrored_predecessor_is_409(self, push, agent):
        push(agent.session("s-1", 1)[0])
        stranger = agent.session("s-1", 2)[1]  # links to another genesis
        response = push(stranger)
        assert response.status_code == HTTPStatus.CONFLICT
        assert "does not link" in response.json()["detail"]

    def test_the_approved_form_keeps_the_position_of_its_suspended_receipt(
        self, push, agent, approver_key
    ):
        suspended = agent.session("s-1", 1)[0]
        push(suspended)
        approved = agent.approve_l1(suspended, approver_key)
        response = push(approved, supersedes=suspended["content"]["action_hash"])
        assert response.status_code == HTTPStatus.CREATED
