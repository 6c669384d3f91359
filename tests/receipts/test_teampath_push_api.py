"""POST /v1/receipts (team-path): the body is the receipt; OutboxPushResult back."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from apps.receipts.models import MirrorEntry
from apps.receipts.selectors import mirror_chain_check
from tests.receipts.factories import as_text
from tests.teampath_fixtures import TEAMPATH, assert_error

pytestmark = TEAMPATH


def test_a_valid_receipt_is_stored_201_with_its_action_hash_as_receipt_id(acme, agent, cast):
    receipt = agent.receipt()
    response = acme.push(receipt)
    assert response.status_code == HTTPStatus.CREATED
    assert response.json() == {
        "receiptId": receipt["content"]["action_hash"],
        "accepted": True,
        "trustLevel": "L0",
    }
    entry = MirrorEntry.objects.get(org=cast.acme)
    assert (entry.seq, entry.action_hash) == (1, receipt["content"]["action_hash"])


def test_a_duplicate_push_is_200_accepted_and_stores_nothing_new(acme, agent):
    receipt = agent.receipt()
    acme.push(receipt)
    again = acme.push(receipt)
    assert again.status_code == HTTPStatus.OK
    assert again.json() == {
        "receiptId": receipt["content"]["action_hash"],
        "accepted": True,
        "trustLevel": "L0",
    }
    assert MirrorEntry.objects.count() == 1


def test_pushes_extend_the_same_per_org_chain(acme, agent, cast):
    for _ in range(3):
        assert acme.push(agent.receipt()).status_code == HTTPStatus.CREATED
    check = mirror_chain_check(org=cast.acme)
    assert check.ok, check.problem
    assert check.size == 3


def test_a_bad_signature_is_422_receipt_rejected_with_the_result_body(acme, agent):
    receipt = agent.receipt()
    receipt["signatures"][0]["signature"] = agent.receipt()["signatures"][0]["signature"]
    response = acme.push(receipt)
    body = assert_error(response, HTTPStatus.UNPROCESSABLE_ENTITY, "receipt_rejected")
    reason = "InvalidSignature: signature verification failed"
    assert body == {
        "error": "receipt_rejected",
        "message": reason,
        "receiptId": receipt["content"]["action_hash"],
        "accepted": False,
        "rejectionReason": reason,
    }
    assert not MirrorEntry.objects.exists()


def test_a_tampered_receipt_is_422_hash_mismatch(acme, agent):
    receipt = agent.receipt()
    receipt["content"]["action"]["fields"]["query"] = "tampered"
    body = assert_error(acme.push(receipt), HTTPStatus.UNPROCESSABLE_ENTITY, "receipt_rejected")
    assert body["rejectionReason"] == "HashMismatch"
    assert body["accepted"] is False


def test_a_claimed_l1_without_an_approver_is_422_trust_level_mismatch(acme, agent):
    body = assert_error(
        acme.push(agent.receipt(trust_level="L1")),
        HTTPStatus.UNPROCESSABLE_ENTITY,
        "receipt_rejected",
    )
    assert body["rejectionReason"].startswith("TrustLevelMismatch: ")


def test_a_receipt_with_a_repeated_member_is_malformed_400(acme, agent):
    receipt = agent.receipt()
    text = as_text(receipt).replace('"trust_level":"L0"', '"trust_level":"L0","trust_level":"L0"')
    body = assert_error(acme.push(text), HTTPStatus.BAD_REQUEST, "validation_failed")
    assert body["accepted"] is False
    assert body["rejectionReason"].startswith("Malformed: ")
    assert body["receiptId"] == receipt["content"]["action_hash"]


def test_an_unknown_member_in_the_receipt_is_malformed_400(acme, agent):
    receipt = agent.receipt()
    receipt["extra"] = 1
    body = assert_error(acme.push(receipt), HTTPStatus.BAD_REQUEST, "validation_failed")
    assert body["rejectionReason"].startswith("Malformed: ")


@pytest.mark.parametrize("body", ["not json", "{", '{"content": NaN}', "\ufeff{}"])
def test_a_body_that_is_not_json_is_400_invalid_json(acme, body):
    assert_error(acme.push(body), HTTPStatus.BAD_REQUEST, "invalid_json")
    assert not MirrorEntry.objects.exists()


@pytest.mark.parametrize("body", ["[]", '"x"', "null", "1"])
def test_a_body_that_is_not_an_object_is_400_validation_failed(acme, body):
    response = acme.push(body)
    assert_error(response, HTTPStatus.BAD_REQUEST, "validation_failed")
    assert "accepted" not in response.json()


@pytest.mark.parametrize(
    "body",
    [
        "{}",
        '{"alg": "heso-action/v2+ed25519", "signatures": []}',
        '{"alg": "heso-action/v2+ed25519", "content": [], "signatures": []}',
        '{"content": null}',
        '{"receipt": {"content": {}}}',
    ],
)
def test_a_receipt_without_a_content_object_is_400_validation_failed(acme, body):
    body_ = assert_error(acme.push(body), HTTPStatus.BAD_REQUEST, "validation_failed")
    assert body_["accepted"] is False
    assert body_["receiptId"] == ""


def test_the_key_scoped_push_wrapper_is_not_this_profiles_body(acme, agent):
    response = acme.push('{"receipt":' + as_text(agent.receipt()) + "}")
    assert_error(response, HTTPStatus.BAD_REQUEST, "validation_failed")


def test_a_non_json_content_type_is_400_invalid_json(acme, agent):
    response = acme.post("/v1/receipts", as_text(agent.receipt()), content_type="text/plain")
    assert_error(response, HTTPStatus.BAD_REQUEST, "invalid_json")


def test_an_oversize_body_is_413_payload_too_large(acme, agent, settings):
    settings.JSON_BODY_MAX_BYTES = 2048
    receipt = agent.receipt(action={**agent.content()["action"], "fields": {"blob": "x" * 4000}})
    assert_error(acme.push(receipt), HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large")


class TestSessionContinuity:
    def test_a_linked_session_is_accepted(self, acme, agent):
        for receipt in agent.session("s-1", 3):
            assert acme.push(receipt).status_code == HTTPStatus.CREATED

    def test_a_fork_is_409_chain_constraint_with_the_result_body(self, acme, agent):
        acme.push(agent.session("s-1", 1)[0])
        fork = agent.session("s-1", 1)[0]
        body = assert_error(acme.push(fork), HTTPStatus.CONFLICT, "chain_constraint")
        assert body["accepted"] is False
        assert body["receiptId"] == fork["content"]["action_hash"]
        assert body["rejectionReason"].startswith("chain_constraint: session 's-1'")
        assert "fork" in body["rejectionReason"]

    def test_a_link_that_misses_the_mirrored_predecessor_is_409(self, acme, agent):
        acme.push(agent.session("s-1", 1)[0])
        stranger = agent.session("s-1", 2)[1]
        body = assert_error(acme.push(stranger), HTTPStatus.CONFLICT, "chain_constraint")
        assert "does not link" in body["rejectionReason"]
