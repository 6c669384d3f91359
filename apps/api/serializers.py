"""Serializer pieces both profiles' APIs share: field types and the base output serializer.

The views' nested ``InputSerializer`` / ``OutputSerializer`` classes are the single
description of every body; drf-spectacular infers the OpenAPI documents from them. The
field types here keep the wire exactly as it was written by hand before: a receipt is
handed through as the strict decoder parsed it, datetimes keep their profile's spelling,
numbers are not coerced.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.openapi import HEX64, ref
from apps.common.errors import InvalidInput
from apps.common.timestamps import utc_text

HASH_HELP = "64 lowercase hex"


@extend_schema_field(OpenApiTypes.ANY)
class RawJsonField(serializers.Field):  # type: ignore[type-arg]
    """A member handed through exactly as the strict JSON decoder parsed it (``JsonValue``:
    repeated member names and number spellings kept), in and out; nothing coerced."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(ref("ActionReceipt"))
class ReceiptField(RawJsonField):
    """A signed receipt: parsed by the receipt decoder later, never by a serializer (its
    bytes are hashed and its signatures checked exactly as the SDK wrote them)."""


@extend_schema_field(
    {
        "anyOf": [ref("ActionReceipt"), {}],
        "description": "An ActionReceipt. Each item is judged on its own: one that is not a "
        "well-formed receipt, of any JSON type, gets `accepted: false` in its result.",
    }
)
class BatchReceiptField(RawJsonField):
    """A receipt of a batch: read like ``ReceiptField``, but the batch answers every item
    (a refusal is that item's result), so the document takes any value here."""


@extend_schema_field({"type": "object", "additionalProperties": True})
class JsonObjectField(RawJsonField):
    """A JSON object handed through untouched (a receipt's content, for instance)."""


@extend_schema_field(OpenApiTypes.NUMBER)
class PlainNumberField(RawJsonField):
    """A number written as computed (an integer stays an integer)."""


class HashField(serializers.RegexField):
    """64 lowercase hex (an ``action_hash``, a policy hash)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", HASH_HELP)
        super().__init__(HEX64, **kwargs)


class IsoDateTimeField(serializers.DateTimeField):
    """A datetime as ``datetime.isoformat()`` writes it (``+00:00``), the key-scoped
    spelling."""

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class Rfc3339Field(serializers.DateTimeField):
    """A datetime in UTC with a ``Z`` suffix, the team-path spelling."""

    def to_representation(self, value: datetime) -> str:
        return utc_text(value)


class BaseOutputSerializer(serializers.Serializer[Any]):
    """Base of the output serializers: members named in ``omit_when_empty`` are left out
    of the answer when None or ``""`` (declare them ``required=False``, which is also what
    the document says of them)."""

    omit_when_empty: ClassVar[tuple[str, ...]] = ()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = dict(super().to_representation(instance))
        for name in self.omit_when_empty:
            if data.get(name) in (None, ""):
                data.pop(name, None)
        return data


class StrictCharField(serializers.CharField):
    """A string member that must be a JSON string (DRF's own would take a number too)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    """A member that must be a JSON integer (DRF's own would take ``"7"`` and ``7.0``)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """A member that must be a JSON ``true`` or ``false`` (DRF's own would take ``0``,
    ``"yes"`` and the like, which the document does not allow)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


@extend_schema_field(
    {
        "type": "string",
        "pattern": r"^\s*[A-Za-z0-9+/]{43}=?\s*$",
        "description": "Ed25519 public key, base64 (32 bytes; the final `=` may be left out).",
    }
)
class Ed25519KeyField(serializers.CharField):
    """An Ed25519 public key in base64: ``canonical_public_key`` judges it (its words)."""


class NoMembersSerializer(serializers.Serializer[Any]):
    """The body of a route that takes nothing: no body, or an empty JSON object."""

    class Meta:
        ref_name = "NoMembers"

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and len(data) == 0:
            return {}
        raise InvalidInput("this route takes no body: send nothing or {}")


class NoMembersSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    """``NoMembersSerializer`` as a closed empty object (drf-spectacular drops a component
    without properties, and with it the request body)."""

    target_class = NoMembersSerializer

    def map_serializer(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": False,
            "description": "Nothing: send no body, or `{}`.",
        }


@extend_schema_field({"type": "string", "format": "date"})
class _DateText(serializers.CharField):
    """A date as sent, ``YYYY-MM-DD``; ``parse_window`` judges it (its words, its range)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_blank=True, trim_whitespace=False, **kwargs)


class EvidenceWindowInput(serializers.Serializer[Any]):
    """``{from?, to?}``, both ``YYYY-MM-DD`` and inclusive (``parse_window`` reads them).
    The member names are Python keywords, hence declared in ``get_fields``."""

    refuses_unknown_members = True  # documented as a closed object (ProfileAutoSchema)

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        return {name: _DateText(required=False, allow_null=True) for name in ("from", "to")}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise InvalidInput("the body must be a JSON object {from?, to?}")
        unknown = set(data) - {"from", "to"}
        if unknown:
            raise InvalidInput(f"unknown member(s): {', '.join(sorted(unknown))}")
        if any(value is not None and not isinstance(value, str) for value in data.values()):
            raise InvalidInput("from, to: dates as strings YYYY-MM-DD")
        return super().to_internal_value(data)
