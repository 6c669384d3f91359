"""The push routes' fast path, shared by both profiles' ``POST /v1/receipts``.

The push is the service's hot path, and instantiating a DRF serializer deep-copies its
fields: for a push, the input and output serializers and DRF's ``JSONRenderer`` are a
measurable share of its CPU (docs/performance/receipts.md). So the push routes read their
body through here:

* the body is read once by the receipt decoder's strict reader (a receipt reaches the
  verifier exactly as sent: repeated names and number spellings kept);
* a body its input serializer would take as it is (``FastInput.takes_as_is``) is handed on
  directly; any other goes through the serializer, whose refusal is the answer;
* the answer is rendered by orjson, byte for byte what the renderer would write.

The serializers stay the description of the bodies (the OpenAPI documents are inferred
from them) and the judges of every refusal; tests/api/test_serializers.py and
tests/api/test_teampath_receipt_results.py hold the direct path to them.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, ClassVar

import orjson
from django.conf import settings
from django.http import HttpResponse
from rest_framework import serializers
from rest_framework.request import Request

from apps.common.errors import InvalidInput, InvalidJson
from apps.common.json_body import read_body_members, read_json_bytes
from apps.receipts.verifier import DecodeError, JsonValue, object_members, parse_json


class FastInput(serializers.Serializer[Any]):
    """An input serializer with a fast path: ``takes_as_is`` says, without instantiating
    it, that it would validate a body's members to themselves."""

    # The members handed on exactly as parsed (a receipt), not held to the plain-body rules.
    raw_members: ClassVar[tuple[str, ...]] = ()
    shape: ClassVar[str] = ""

    @classmethod
    def takes_as_is(cls, members: dict[str, Any]) -> bool:
        return False


def push_members(request: Request, input_class: type[FastInput]) -> dict[str, Any]:
    """The validated members of a push body that is a JSON object of members."""
    members = read_body_members(request, shape=input_class.shape, raw=input_class.raw_members)
    return fast_validated(input_class, members)


def fast_validated(input_class: type[FastInput], members: dict[str, Any]) -> dict[str, Any]:
    """``members`` themselves when ``input_class`` would take them as they are; otherwise
    its ``validated_data`` (its refusal raised as a ``ValidationError``)."""
    if input_class.takes_as_is(members):
        return members
    data = input_class(data=members)
    data.is_valid(raise_exception=True)
    validated: dict[str, Any] = data.validated_data
    return validated


def push_receipt(request: Request) -> JsonValue:
    """A push body that is the receipt itself (team-path): a JSON object, as parsed."""
    value = parse_body(read_json_bytes(request))
    if object_members(value) is None:
        raise InvalidInput("the body must be the receipt, a JSON object")
    return value


def parse_body(body: bytes) -> JsonValue:
    """The body parsed strictly (repeated member names and number spellings kept, so a
    receipt reaches the verifier exactly as sent); not JSON is ``invalid_json``."""
    try:
        return parse_json(body, max_depth=settings.JSON_BODY_MAX_DEPTH)
    except DecodeError as error:
        raise InvalidJson(f"invalid JSON body: {error}") from error


def rendered(answer: dict[str, Any]) -> bytes:
    """The answer's bytes, as DRF's ``JSONRenderer`` writes them (compact), by orjson."""
    return orjson.dumps(answer)


def push_response(answer: dict[str, Any], *, appended: bool) -> HttpResponse:
    """A push's answer: 201 once stored now, 200 when it was stored before."""
    return HttpResponse(
        rendered(answer),
        status=HTTPStatus.CREATED if appended else HTTPStatus.OK,
        content_type="application/json",
    )
