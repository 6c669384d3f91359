"""The serializer pieces of apps/api: raw members handed through, omissions, datetime
spellings, and the raw-body routes' refusals worded as they were before serializers read
them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from http import HTTPStatus
from typing import Any

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient

from apps.api.serializers import (
    BaseOutputSerializer,
    IsoDateTimeField,
    ReceiptField,
    Rfc3339Field,
    StrictCharField,
)
from apps.common.errors import InvalidInput, InvalidJson
from apps.common.json_body import raw_body_members
from apps.receipts.verifier import object_members, parse_json
from apps.tenancy.models import Scope
from apps.tenancy.services import api_key_issue
from tests.receipts.factories import Agent
from tests.teampath_fixtures import TeamPathCaller, assert_error

HEX = "ab" * 32


class _Receipt(serializers.Serializer[Any]):
    receipt = ReceiptField()


def test_a_receipt_member_reaches_the_service_exactly_as_parsed():
    parsed = parse_json(b'{"receipt":{"content":{"a":1.50,"a":2}}}')
    members = dict(object_members(parsed) or [])
    data = _Receipt(data=members)
    assert data.is_valid()
    receipt = data.validated_data["receipt"]
    assert receipt is members["receipt"]  # the very object: repeats and spellings kept
    content = dict(object_members(receipt) or [])["content"]
    assert [name for name, _ in object_members(content) or []] == ["a", "a"]


def test_raw_body_members_keeps_the_raw_ones_and_holds_the_others_to_the_plain_rules():
    body = b'{"receipt":{"x":1,"x":2},"hint":"ok"}'
    members = raw_body_members(body, raw=["receipt"])
    assert members["hint"] == "ok"
    assert [name for name, _ in object_members(members["receipt"]) or []] == ["x", "x"]
    with pytest.raises(InvalidInput, match="repeats a member name"):
        raw_body_members(b'{"a":1,"a":2}')
    with pytest.raises(InvalidInput, match=r"unknown member\(s\): b"):
        raw_body_members(b'{"a":1,"b":2}', allowed=["a"])
    with pytest.raises(InvalidInput, match=r"U\+0000"):
        raw_body_members(b'{"hint":"\\u0000"}')
    with pytest.raises(InvalidInput, match=r"^the body must be a JSON object \{a\}$"):
        raw_body_members(b"[]", shape="{a}")
    with pytest.raises(InvalidJson):
        raw_body_members(b"{")


class _Answer(BaseOutputSerializer):
    omit_when_empty = ("claim",)

    seq = serializers.IntegerField()
    claim = serializers.CharField(required=False)
    hint = serializers.CharField(allow_null=True)


def test_the_output_base_omits_empty_optional_members_and_keeps_nulls_it_must():
    assert _Answer({"seq": 1, "claim": "", "hint": None}).data == {"seq": 1, "hint": None}
    assert _Answer({"seq": 1, "claim": None, "hint": None}).data == {"seq": 1, "hint": None}
    assert _Answer({"seq": 1, "claim": "L1", "hint": "x"}).data == {
        "seq": 1,
        "claim": "L1",
        "hint": "x",
    }


def test_datetimes_keep_each_profiles_spelling():
    moment = datetime(2026, 1, 2, 3, 4, 5, 600, tzinfo=UTC)
    assert IsoDateTimeField().to_representation(moment) == "2026-01-02T03:04:05.000600+00:00"
    later = moment.astimezone(timezone(timedelta(hours=2)))
    assert Rfc3339Field().to_representation(later) == "2026-01-02T03:04:05.000600Z"


def test_a_strict_string_refuses_numbers():
    field = StrictCharField()
    with pytest.raises(serializers.ValidationError):
        field.run_validation(5)
    assert field.run_validation("5") == "5"


# --- The raw-body routes' refusals keep their words ---------------------------------


@pytest.fixture
def sdk(cast: Any) -> APIClient:
    key = api_key_issue(org=cast.acme, scopes=list(Scope), label="every scope")
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key.secret)
    return client


def refused(client: APIClient, path: str, body: object) -> str:
    response = client.generic("POST", path, json.dumps(body), content_type="application/json")
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, response.content
    detail: str = response.json()["detail"]
    return detail


@pytest.mark.django_db
def test_the_key_scoped_push_refuses_in_its_own_words(sdk):
    assert refused(sdk, "/v1/receipts", {}) == "receipt: this member is required"
    assert refused(sdk, "/v1/receipts", {"receipt": []}) == "receipt: must be a JSON object"
    assert (
        refused(sdk, "/v1/receipts", {"receipt": {}})
        == "receipt.content: must be present and a JSON object"
    )
    wrong = {"receipt": {"content": {}}, "supersedes_action_hash": "x"}
    assert refused(sdk, "/v1/receipts", wrong) == (
        "supersedes_action_hash: must be 64 lowercase hex characters"
    )
    assert refused(sdk, "/v1/receipts", []) == (
        "the body must be a JSON object {receipt, supersedes_action_hash?}"
    )


@pytest.mark.django_db
def test_the_key_scoped_vote_refuses_in_its_own_words(sdk):
    path = f"/v1/approvals/{HEX}/submit-token"
    content = Agent().receipt()["content"]
    assert refused(sdk, path, {"action_content": content}) == (
        "token_b64: required, a base64 string"
    )
    assert refused(sdk, path, {"token_b64": 5, "action_content": content}) == (
        "token_b64: required, a base64 string"
    )
    assert refused(sdk, path, {"token_b64": "!", "action_content": content}) == (
        "token_b64: not valid base64"
    )
    assert refused(sdk, path, {"token_b64": "AAAA"}) == "action_content: required"
    base = {"token_b64": "AAAA", "action_content": content}
    assert refused(sdk, path, {**base, "decision": "maybe"}) == (
        "decision: must be approved or rejected"
    )
    assert refused(sdk, path, {**base, "reason": 5}) == (
        "reason: a string of at most 2000 characters"
    )
    assert refused(sdk, path, {**base, "record": "{}"}) == (
        "record and co_sig_b64 go together (both strings)"
    )
    assert refused(sdk, path, {**base, "record": 1, "co_sig_b64": "x"}) == (
        "record: the ApproverRecord as JSON text (a string)"
    )


@pytest.mark.django_db
def test_team_path_approval_bodies_refuse_in_their_own_words(cast, settings):
    settings.ROOT_URLCONF = "config.urls.teampath"
    settings.API_PROFILE = "teampath"
    acme = TeamPathCaller(cast.acme_key.secret)
    body = assert_error(acme.post("/v1/approvals", {}), 400, "validation_failed")
    assert body["message"] == "receipt: this member is required"
    hint = {"receipt": {"content": {}}, "routingHint": 5}
    body = assert_error(acme.post("/v1/approvals", hint), 400, "validation_failed")
    assert body["message"] == "routingHint: a string of at most 200 chars"
    body = assert_error(acme.post("/v1/approvals", {"x": 1}), 400, "validation_failed")
    assert body["message"] == "unknown member(s): x"
    token = "/v1/approvals/apr_unknown/token"
    body = assert_error(acme.post(token, {"token": ""}), 400, "validation_failed")
    assert body["message"] == "token: required, the approver's signed token in base64"
    body = assert_error(acme.post(token, {"token": "!"}), 400, "validation_failed")
    assert body["message"] == "token: not valid base64"


# The key-scoped push handles a well-formed body and its answer without instantiating its
# serializers (the hot path); what it does must be what the serializers would do.


@pytest.mark.parametrize(
    "body",
    [
        b'{"receipt":{"content":{"a":1}}}',
        b'{"receipt":{"content":{"a":1}},"supersedes_action_hash":null}',
        b'{"receipt":{"content":{"a":1}},"supersedes_action_hash":"' + HEX.encode() + b'"}',
        b'{"receipt":{"content":{"a":1}},"extra":5}',
    ],
)
def test_the_push_takes_a_well_formed_body_as_its_serializer_does(body):
    from apps.api.keyscoped.receipts import ReceiptPushApi
    from apps.api.push import fast_validated

    members = raw_body_members(body, raw=["receipt"])
    serializer = ReceiptPushApi.InputSerializer(data=members)
    assert serializer.is_valid()
    expected = (
        serializer.validated_data["receipt"],
        serializer.validated_data.get("supersedes_action_hash"),
    )
    validated = fast_validated(ReceiptPushApi.InputSerializer, members)
    assert (validated["receipt"], validated.get("supersedes_action_hash")) == expected


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"receipt":{"content":{}},"supersedes_action_hash":" ' + HEX.encode() + b' "}', None),
        (b'{"receipt":{"content":{}},"supersedes_action_hash":"' + HEX.encode() + b'\\n"}', None),
        (b'{"receipt":{"content":{}},"supersedes_action_hash":"AB"}', "must be 64 lowercase"),
        (b'{"receipt":{"content":[]}}', "receipt.content: must be present"),
        (b'{"receipt":{}}', "receipt.content: must be present"),
        (b'{"receipt":"x"}', "receipt: must be a JSON object"),
        (b"{}", "receipt: this member is required"),
    ],
)
def test_any_other_push_body_is_decided_by_the_serializer(body, error):
    """Whitespace around a hash is the serializer's to trim; refusals are its words."""
    from rest_framework.exceptions import ValidationError

    from apps.api.base import flatten_validation
    from apps.api.keyscoped.receipts import ReceiptPushApi
    from apps.api.push import fast_validated

    members = raw_body_members(body, raw=["receipt"])
    serializer = ReceiptPushApi.InputSerializer(data=members)
    if error is None:
        assert serializer.is_valid()
        validated = fast_validated(ReceiptPushApi.InputSerializer, members)
        assert validated.get("supersedes_action_hash") == HEX
        return
    with pytest.raises(ValidationError) as refused_with:
        fast_validated(ReceiptPushApi.InputSerializer, members)
    assert error in flatten_validation(refused_with.value.detail)


@pytest.mark.parametrize(
    "outcome",
    [
        {"seq": 3, "action_hash": HEX, "appended": True, "trust_level": "L0"},
        {"seq": 9, "action_hash": HEX, "appended": False, "trust_level": "L1"},
        {
            "seq": 4,
            "action_hash": HEX,
            "appended": True,
            "trust_level": "L2",
            "claimed_trust_level": "L1",
        },
    ],
)
def test_the_push_answers_what_its_output_serializer_would(outcome):
    from rest_framework.renderers import JSONRenderer

    from apps.api.keyscoped.receipts import ReceiptPushApi
    from apps.api.push import rendered
    from apps.receipts.services import AppendOutcome

    value = AppendOutcome(**outcome)
    direct = ReceiptPushApi.answer(value)
    assert direct == ReceiptPushApi.OutputSerializer(value).data
    assert list(direct) == list(ReceiptPushApi.OutputSerializer(value).data)
    # The bytes too: what DRF's renderer would have written for the serializer's data.
    drf = JSONRenderer().render(ReceiptPushApi.OutputSerializer(value).data)
    assert rendered(direct) == drf
