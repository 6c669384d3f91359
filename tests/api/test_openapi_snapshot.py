"""Both OpenAPI documents against snapshots: no route, status, parameter or body field lost.

The snapshots under ``tests/data/openapi/`` were taken from the hand-written documents before
the descriptions moved into the views' serializers. A live document may say more
than its snapshot, never less: every path and method, every response status and content
type, every parameter, and every property of every request and response body (``$ref`` and
``allOf`` resolved, arrays and maps followed, recursively) must still be there. The shapes
are compared, not the component names.

A change that adds to a document retakes both snapshots (sorted keys, one-space indent)::

    DJANGO_SETTINGS_MODULE=config.settings.test python -m tests.api.retake_openapi_snapshots
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.api.openapi import profile_document

SNAPSHOTS = Path(__file__).resolve().parent.parent / "data" / "openapi"
PROFILES = ("keyscoped", "teampath")
METHODS = ("get", "post", "put", "patch", "delete")
MAX_DEPTH = 12  # deeper than any body; stops a self-referencing schema

Schema = dict[str, Any]


def fields(schema: Schema, components: Schema, prefix: str = "", depth: int = 0) -> set[str]:
    """Every property path of ``schema``: ``a``, ``a.b``, ``a[].c``, ``a{}.d`` (map values)."""
    if depth > MAX_DEPTH or not isinstance(schema, dict):
        return set()
    found: set[str] = set()
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        found |= fields(components[name], components, prefix, depth + 1)
    for combined in ("allOf", "oneOf", "anyOf"):
        for part in schema.get(combined, []):
            found |= fields(part, components, prefix, depth + 1)
    for name, member in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        found.add(path)
        found |= fields(member, components, path, depth + 1)
    if isinstance(schema.get("items"), dict):
        found |= fields(schema["items"], components, prefix + "[]", depth + 1)
    if isinstance(schema.get("additionalProperties"), dict):
        found |= fields(schema["additionalProperties"], components, prefix + "{}", depth + 1)
    return found


def inventory(document: Schema) -> set[str]:
    """Everything a client can rely on, one line per item."""
    components = document.get("components", {}).get("schemas", {})
    items: set[str] = set()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method not in METHODS:
                continue
            where = f"{method.upper()} {path}"
            items.add(where)
            for parameter in operation.get("parameters", []):
                items.add(f"{where} parameter {parameter['in']}:{parameter['name']}")
            for media, body in operation.get("requestBody", {}).get("content", {}).items():
                items.add(f"{where} request {media}")
                for field in fields(body.get("schema", {}), components):
                    items.add(f"{where} request {media} {field}")
            for status, response in operation.get("responses", {}).items():
                items.add(f"{where} {status}")
                for header in response.get("headers", {}):
                    items.add(f"{where} {status} header {header}")
                for media, body in response.get("content", {}).items():
                    items.add(f"{where} {status} {media}")
                    for field in fields(body.get("schema", {}), components):
                        items.add(f"{where} {status} {media} {field}")
    return items


def snapshot(profile: str) -> Schema:
    document: Schema = json.loads((SNAPSHOTS / f"{profile}.json").read_text())
    return document


@pytest.mark.parametrize("profile", PROFILES)
def test_the_document_keeps_every_route_status_and_field_of_its_snapshot(profile):
    lost = inventory(snapshot(profile)) - inventory(profile_document(profile))
    assert not lost, "\n".join(sorted(lost))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_security_schemes_are_those_of_the_snapshot(profile):
    schemes = profile_document(profile)["components"]["securitySchemes"]
    assert schemes == snapshot(profile)["components"]["securitySchemes"]


def test_the_inventory_sees_nested_fields_through_references():
    # The guard itself: a field two references deep, in an array, is an item of its own.
    document = snapshot("teampath")
    items = inventory(document)
    assert "GET /v1/teams/{team_id}/policy 200 application/json rules[].subject.kind" in items
    assert "GET /v1/approvals/{approval_id} 200 application/json approval.votes[].votedAt" in items
    assert "POST /v1/receipts 422 application/json rejectionReason" in items
    document["paths"]["/v1/receipts"]["post"]["responses"].pop("422")
    assert "POST /v1/receipts 422 application/json rejectionReason" not in inventory(document)
