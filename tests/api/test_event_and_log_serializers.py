"""The serializers of the event routes and of the transparency log's routes: optional
members left out as before, the wire spellings kept, bodies that are not objects refused in
the words they had, and the hand-kept event components reduced to the webhook bodies."""

from __future__ import annotations

from datetime import UTC, date, datetime
from http import HTTPStatus
from typing import Any

import pytest
from rest_framework.test import APIClient

from apps.api.keyscoped.exports import EvidenceExportJobSerializer
from apps.api.openapi import profile_document
from apps.api.openapi_events import EVENT_COMPONENTS
from apps.api.serializers import NoMembersSerializer
from apps.api.transparency_base import CosignatureInputSerializer, ProofSerializer
from apps.audit.models import EvidenceExportJob, ExportStatus
from apps.common.errors import InvalidInput

HEX = "ab" * 32
PROOF: dict[str, Any] = {
    "log_id": "countersign.example/log",
    "leaf_index": 0,
    "inclusion_proof": [],
    "org_root": HEX,
    "org_tree_size": 1,
    "epoch": 3,
    "org_id": "olog_" + "a" * 26,
    "top_leaf_index": 7,
    "checkpoint": "countersign.example/log\n8\nq83=\n",
}


def test_a_proof_without_its_optional_members_is_answered_without_them():
    assert ProofSerializer(PROOF).data == PROOF


def test_a_proof_with_its_top_path_and_cosignatures_is_answered_as_built():
    full = {
        **PROOF,
        "top_inclusion_proof": [HEX, "cd" * 32],
        "cosignatures": [{"witness_key": "w1+0a0b0c0d+AAAA", "signature": "c2ln"}],
    }
    assert ProofSerializer(full).data == full


@pytest.mark.parametrize("body", [None, [1], "text", 5])
def test_a_cosignature_body_that_is_not_an_object_is_refused_in_its_own_words(body):
    data = CosignatureInputSerializer(data=body)
    with pytest.raises(InvalidInput, match=r"^the body must be a JSON object \{checkpoint_size"):
        data.is_valid(raise_exception=True)


def test_a_cosignature_body_hands_its_members_to_the_service_unjudged():
    # cosignature_submit judges them (§5.6's order and words): a bool, a string, a missing
    # member all reach it as sent.
    data = CosignatureInputSerializer(data={"checkpoint_size": True, "extra": 1})
    assert data.is_valid()
    assert data.validated_data == {"checkpoint_size": True, "cosignature": None}


@pytest.mark.django_db
def test_a_null_cosignature_body_is_a_validation_error_of_the_profile():
    response = APIClient().generic(
        "POST", "/v1/log/cosignatures", "null", content_type="application/json"
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json() == {
        "detail": "the body must be a JSON object {checkpoint_size, cosignature}"
    }


@pytest.mark.parametrize("body", [{}, None])
def test_a_route_that_takes_nothing_takes_an_empty_object(body):
    data = NoMembersSerializer(data=body if body is not None else {})
    assert data.is_valid()


@pytest.mark.parametrize("body", [{"a": 1}, [], "x"])
def test_a_route_that_takes_nothing_refuses_anything_else(body):
    with pytest.raises(InvalidInput, match=r"^this route takes no body: send nothing or \{\}$"):
        NoMembersSerializer(data=body).is_valid()


def test_an_export_job_keeps_its_window_names_order_and_nulls():
    job = EvidenceExportJob(
        export_id="exp_abc",
        status=ExportStatus.PENDING,
        window_from=date(2026, 1, 2),
        window_to=None,
        created_at=datetime(2026, 1, 3, 4, 5, 6, tzinfo=UTC),
        sha256="",
        error="",
    )
    body = EvidenceExportJobSerializer(job).data
    assert list(body) == [
        "id", "status", "from", "to", "created_at", "finished_at", "size", "sha256", "error",
        "url", "download_url",
    ]  # fmt: skip
    assert body["from"] == "2026-01-02"
    assert body["to"] is None
    assert body["created_at"] == "2026-01-03T04:05:06Z"
    assert body["sha256"] is None  # not yet built: null, never ""
    assert body["url"] == "/v1/evidence/exports/exp_abc"
    assert body["download_url"] is None
    job.status, job.sha256 = ExportStatus.READY, "f" * 64
    ready = EvidenceExportJobSerializer(job).data
    assert ready["download_url"] == "/v1/evidence/exports/exp_abc/download"
    assert ready["sha256"] == "f" * 64


@pytest.mark.django_db
def test_a_null_export_request_is_refused_as_any_other_non_object(dashboard):
    response = dashboard("auditor").generic(
        "POST", "/v1/evidence/exports", "null", content_type="application/json"
    )
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    assert response.json() == {"detail": "the body must be a JSON object {from?, to?}"}


def _closure(name: str, components: dict[str, Any]) -> set[str]:
    found: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.add(current)
        text = repr(components[current])
        pending.extend(other for other in components if f"#/components/schemas/{other}'" in text)
    return found


def test_the_hand_kept_event_components_are_only_the_webhook_bodies():
    # Every route body of the event routes comes from a serializer: what is left by hand is
    # what WebhookEvent (sent, not served) references.
    assert set(EVENT_COMPONENTS) == _closure("WebhookEvent", EVENT_COMPONENTS)


@pytest.mark.parametrize("profile", ["keyscoped", "teampath"])
def test_the_log_routes_json_bodies_are_serializer_components(profile):
    document = profile_document(profile)
    components = document["components"]["schemas"]
    for name in ("LogProof", "LogConsistency", "LogOrgConsistency", "LogLeaves"):
        assert name in components
    cosign = document["paths"]["/v1/log/cosignatures"]["post"]
    schema = cosign["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/LogCosignatureRequest"}
    assert components["LogCosignatureRequest"]["required"] == ["checkpoint_size", "cosignature"]
    proof = components["LogProof"]
    assert "top_inclusion_proof" not in proof["required"]
    assert "cosignatures" not in proof["required"]
    # The checkpoint note and the tiles stay text and bytes.
    checkpoint = document["paths"]["/v1/log/checkpoint"]["get"]["responses"]["200"]
    assert list(checkpoint["content"]) == ["text/plain"]
    tile = document["paths"]["/v1/log/tile/{tile}"]["get"]["responses"]["200"]
    assert list(tile["content"]) == ["application/octet-stream"]
