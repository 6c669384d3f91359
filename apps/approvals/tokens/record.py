"""ApproverRecord decoding with the reference's leniency (approvals.md §4, receipts.md §3).

The receipt verifier's ``decode_approver_record`` is deliberately strict (server.md §1: the
mirror stores exactly what is signed). A record, though, reaches the signed bytes only after
the SDK has decoded it, so a record the reference accepts must be accepted here too, and
must normalize to the same value: unknown members are dropped, the sequence form is
accepted, ``null`` for ``sla_minutes`` means absent, and ``decision`` may be written as a
one-member ``{"approved": null}`` object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from apps.common.vocabulary import RECORD_DECISIONS
from apps.receipts.verifier import DecodeError, JsonNumber, JsonObject, JsonValue, parse_json

_REQUIRED_STRINGS = ("approver_identity", "reason", "decided_at")
# Declaration order: the positions of the sequence form and the order of the output.
_MEMBERS = ("decision", "approver_identity", "reason", "decided_at", "sla_minutes")
_U32_MAX = 2**32 - 1
_TYPED_INT = re.compile(r"0|[1-9][0-9]*")

JsonInput = str | bytes | Mapping[str, Any]


def as_json_value(value: JsonInput | JsonValue) -> JsonValue:
    """JSON text is parsed strictly; a plain ``json.loads`` mapping is re-read the same way.

    Parsed values (``JsonObject``) pass through, so callers can hand over either form.
    """
    if isinstance(value, str | bytes):
        return parse_json(value)
    if isinstance(value, Mapping):
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise DecodeError(f"not a JSON value: {error}") from None
        return parse_json(text)
    return value


def decode_record(value: JsonInput | JsonValue) -> dict[str, Any]:
    """The normalized ApproverRecord, members in declaration order.

    Raises ``DecodeError`` naming the first problem.
    """
    members = _members(as_json_value(value))
    decoded: dict[str, Any] = {"decision": _decision(members.get("decision"))}
    for name in _REQUIRED_STRINGS:
        member = members.get(name)
        if not isinstance(member, str):
            problem = "required member missing" if member is None else "expected a string"
            raise DecodeError(f"record.{name}: {problem}")
        if "\x00" in member:  # server.md §1: a signed receipt could not carry it either
            raise DecodeError(f"record.{name}: U+0000 (NUL) is not allowed")
        decoded[name] = member
    sla = members.get("sla_minutes")
    if sla is not None:
        if not isinstance(sla, JsonNumber) or not _TYPED_INT.fullmatch(sla.text):
            raise DecodeError("record.sla_minutes: expected a non-negative integer literal")
        if len(sla.text) > len(str(_U32_MAX)) or int(sla.text) > _U32_MAX:
            raise DecodeError("record.sla_minutes: integer out of range")
        decoded["sla_minutes"] = int(sla.text)
    return decoded


def _members(value: JsonValue) -> dict[str, Any]:
    if isinstance(value, JsonObject):
        members: dict[str, Any] = {}
        for name, member in value:
            if name not in _MEMBERS:
                continue  # unknown members are dropped, repeated or not
            if name in members:
                raise DecodeError(f"record.{name}: repeated member name")
            members[name] = member
        return members
    if isinstance(value, list):
        if len(value) > len(_MEMBERS):
            raise DecodeError("record: too many elements in the sequence form")
        return dict(zip(_MEMBERS, value, strict=False))
    raise DecodeError("record: expected an object")


def _decision(value: Any) -> str:
    if isinstance(value, JsonObject) and len(value) == 1 and value[0][1] is None:
        value = value[0][0]  # the unit-variant map form {"approved": null}
    if value is None:
        raise DecodeError("record.decision: required member missing")
    if not isinstance(value, str) or value not in RECORD_DECISIONS:
        raise DecodeError("record.decision: not one of the allowed values")
    return value
