"""The closed receipt schema (receipts.md §1-2) and its strict decoder (server.md §1).

Decoding turns the parsed JSON into the *normalized* receipt: plain dicts and lists with
only known members, free-form numbers as the doubles the reference hashes. This service is
stricter than the reference: anything the reference would silently normalize (sequence
form, unknown members, ``null`` for an optional member, enum-as-object, repeated names,
``false``/``[]`` written out for defaults) is refused, so the stored text is exactly what
the signatures cover. U+0000 (NUL) is refused in every string and member name outside the
free-form ``action.fields`` object (the service indexes those strings, and PostgreSQL
``text`` cannot hold NUL); inside ``fields`` it is kept, and the stored JCS text escapes it.
"""

from __future__ import annotations

import re
from typing import Any

from apps.common.vocabulary import (
    DECISION_PATHS,
    LIFECYCLE_KINDS,
    ON_TIMEOUT,
    RECORD_DECISIONS,
    TRUST_LEVELS,
    VERBS,
)
from apps.receipts.verifier.receipt_text import DecodeError, JsonNumber, JsonObject

# Presence codes of receipts.md §2: R required, O optional, F boolean defaulting to false,
# E array defaulting to empty.
REQ, OPT, FLAG, LIST = "R", "O", "F", "E"

Type = tuple[Any, ...]
Fields = dict[str, tuple[str, Type]]

STR: Type = ("str",)
U32: Type = ("int", 2**32 - 1)
U64: Type = ("int", 2**64 - 1)
BOOL: Type = ("bool",)
FREE: Type = ("free",)
FREE_OBJECT: Type = ("free_object",)
SURFACE: Type = ("surface",)


def enum(*values: str) -> Type:
    return ("enum", frozenset(values))


def obj(fields: Fields) -> Type:
    return ("obj", fields)


def arr(element: Type) -> Type:
    return ("arr", element)


STRINGS = arr(STR)

OBSERVED_FACTS: Fields = {
    "host": (OPT, STR),
    "path": (OPT, STR),
    "realpath": (OPT, STR),
    "method": (OPT, enum("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")),
    "argv_tokens": (LIST, STRINGS),
    "row_count_estimate": (OPT, U64),
    "is_payment": (FLAG, BOOL),
    "is_secret": (FLAG, BOOL),
    "is_identity_change": (FLAG, BOOL),
    "is_model_call": (FLAG, BOOL),
    "effect_destructive": (FLAG, BOOL),
    "is_local_compute": (FLAG, BOOL),
    "origin": (
        OPT,
        enum(
            "browser_driver", "browser_form", "messaging_sdk", "payment_sdk",
            "agent_protocol", "storage_sdk", "sdk", "proxy",
        ),
    ),
    "observed_via": (OPT, enum("fs_hook", "object_sdk", "sql_proxy", "iac_tool", "http_delete")),
    "has_file_body": (FLAG, BOOL),
    "mcp_server": (OPT, STR),
}  # fmt: skip

ERT: Fields = {
    "observed_facts": (REQ, obj(OBSERVED_FACTS)),
    "resource_class": (REQ, STR),
    "effect": (
        REQ,
        enum("observe", "mutate", "destroy", "transfer_out", "spend", "grant", "effect_unknown"),
    ),
    "egress": (REQ, enum("local", "crosses_trust_boundary", "crosses_unknown")),
    "observability": (REQ, enum("wire", "args", "symbol", "blind")),
    "taxonomy_hash": (REQ, STR),
}

MANDATE: Fields = {
    "mandate_id": (REQ, STR),
    "mandate_hash": (REQ, STR),
    "verdict": (REQ, enum("valid", "invalid", "absent")),
    "payee": (REQ, STR),
    "amount_minor": (REQ, U64),
    "currency": (REQ, STR),
}

ACTION: Fields = {
    "verb": (REQ, enum(*VERBS)),
    "domain": (OPT, STR),
    "action": (OPT, STR),
    "ert": (OPT, obj(ERT)),
    "mandate": (OPT, obj(MANDATE)),
    "tool_name": (REQ, STR),
    "target_host": (OPT, STR),
    "workflow": (REQ, STR),
    "account": (REQ, STR),
    "fields": (REQ, FREE_OBJECT),
    "result_hash": (OPT, STR),
    "error": (OPT, STR),
}  # fmt: skip

MATCHED_CONDITION: Fields = {"field": (REQ, STR), "op": (REQ, STR), "value": (REQ, FREE)}

POLICY: Fields = {
    "rule_id": (REQ, STR),
    "rule_display": (REQ, STR),
    "matched_conditions": (REQ, arr(obj(MATCHED_CONDITION))),
    "decision_path": (REQ, enum(*DECISION_PATHS)),
}

APPROVER_RECORD: Fields = {
    "decision": (REQ, enum(*RECORD_DECISIONS)),
    "approver_identity": (REQ, STR),
    "reason": (REQ, STR),
    "decided_at": (REQ, STR),
    "sla_minutes": (OPT, U32),
}

MULTI_APPROVAL: Fields = {
    "threshold": (REQ, U32),
    "roster": (REQ, STRINGS),
    "approvers": (REQ, arr(obj(APPROVER_RECORD))),
}

REDACTION_MARKER: Fields = {
    "field_path": (REQ, STR),
    "algorithm": (REQ, STR),
    "commitment": (REQ, STR),
}

REDACTION: Fields = {
    "mode": (REQ, enum("commit_and_reveal", "destructive")),
    "markers": (REQ, arr(obj(REDACTION_MARKER))),
    "merkle_root": (OPT, STR),
}

GUARDRAIL_FINDING: Fields = {
    "category": (REQ, enum("prompt_injection", "jailbreak", "tool_poisoning")),
    "surface": (REQ, SURFACE),
    "pattern_id": (REQ, STR),
    "severity": (REQ, enum("suspicious", "malicious")),
}

GUARDRAIL: Fields = {
    "findings": (REQ, arr(obj(GUARDRAIL_FINDING))),
    "decision": (REQ, enum("block", "require_approval")),
}

SUSPENSION: Fields = {
    "resume_token_hash": (REQ, STR),
    "context_ref": (
        REQ,
        obj(
            {
                "scheme": (REQ, enum("customer", "langgraph", "none")),
                "key": (REQ, STR),
                "hash": (REQ, STR),
            }
        ),
    ),
    "tool_binding_hash": (OPT, STR),
    "policy": (REQ, obj({"policy_id": (REQ, STR), "policy_hash": (REQ, STR), "rule": (REQ, STR)})),
    "approval": (
        REQ,
        obj(
            {
                "sla": (REQ, STR),
                "expires_at": (REQ, STR),
                "on_timeout": (REQ, enum(*ON_TIMEOUT)),
                "approver_pubkeys": (REQ, STRINGS),
                "escalation": (OPT, obj({"after": (REQ, STR), "to": (REQ, STRINGS)})),
            }
        ),
    ),
}

KEY_ROTATION: Fields = {
    "role": (REQ, enum("producer", "decision")),
    "outgoing_public_key": (REQ, STR),
    "incoming_public_key": (REQ, STR),
}

TIME_ANCHOR: Fields = {
    "kind": (REQ, STR),
    "token_b64": (REQ, STR),
    "tsa": (REQ, STR),
    "anchored_hash": (REQ, STR),
}

ATTESTATION: Fields = {
    "kind": (REQ, STR),
    "evidence": (REQ, STR),
    "bound_field": (REQ, STR),
    "collateral": (LIST, STRINGS),
}

METRICS: Fields = {
    "duration_ms": (REQ, U32),
    "status": (REQ, enum("ok", "client_error", "server_error", "timeout", "refused", "error")),
    "status_code": (OPT, U32),
    "tokens_in": (OPT, U32),
    "tokens_out": (OPT, U32),
    "token_source": (OPT, enum("provider_reported", "estimated")),
    "rate_card_id": (OPT, STR),
    "bytes_in": (OPT, U32),
    "bytes_out": (OPT, U32),
    "retries": (OPT, U32),
}

CONTENT: Fields = {
    "action_version": (REQ, STR),
    "captured_at": (REQ, STR),
    "agent_identity": (REQ, STR),
    "action": (REQ, obj(ACTION)),
    "policy": (REQ, obj(POLICY)),
    "approver_decision": (OPT, obj(APPROVER_RECORD)),
    "multi_approval": (OPT, obj(MULTI_APPROVAL)),
    "redaction": (OPT, obj(REDACTION)),
    "guardrail": (OPT, obj(GUARDRAIL)),
    "trust_level": (REQ, enum(*TRUST_LEVELS)),
    "action_hash": (REQ, STR),
    "session_id": (OPT, STR),
    "seq": (OPT, U64),
    "prev_receipt_hash": (OPT, STR),
    "kind": (OPT, enum(*LIFECYCLE_KINDS)),
    "suspension": (OPT, obj(SUSPENSION)),
    "key_rotation": (OPT, obj(KEY_ROTATION)),
    "nonce": (OPT, STR),
    "time_anchor": (OPT, obj(TIME_ANCHOR)),
    "anchor_policy": (OPT, enum("required")),
    "attestation": (OPT, obj(ATTESTATION)),
    "metrics": (OPT, obj(METRICS)),
}

SIGNATURE_ENTRY: Fields = {
    "algorithm": (REQ, STR),
    "key_id": (REQ, STR),
    "public_key": (REQ, STR),
    "signature": (REQ, STR),
    "valid_from": (OPT, STR),
    "valid_until": (OPT, STR),
}

TRANSPARENCY_PROOF: Fields = {
    "log_id": (REQ, STR),
    "leaf_index": (REQ, U64),
    "inclusion_proof": (REQ, STRINGS),
    "org_root": (OPT, STR),
    "org_tree_size": (OPT, U64),
    "epoch": (OPT, U64),
    "org_id": (OPT, STR),
    "top_leaf_index": (OPT, U64),
    "top_inclusion_proof": (OPT, STRINGS),
    "checkpoint": (REQ, STR),
    "cosignatures": (OPT, arr(obj({"witness_key": (REQ, STR), "signature": (REQ, STR)}))),
}

ENVELOPE: Fields = {
    "alg": (REQ, STR),
    "content": (REQ, obj(CONTENT)),
    "signatures": (REQ, arr(obj(SIGNATURE_ENTRY))),
    "transparency": (OPT, arr(obj(TRANSPARENCY_PROOF))),
}

_TYPED_INT = re.compile(r"0|[1-9][0-9]*")
_TYPED_INT_MAX_DIGITS = len(str(2**64 - 1))
_MAX_EXACT_DOUBLE_INT = 2**53
_NUL = "\x00"
_NUL_REFUSED = "U+0000 (NUL) is not allowed outside action.fields"


Path = tuple[Any, str | int] | str


def _render(path: Path) -> str:
    """Error paths are built only when an error is raised: the hot path never formats."""
    segments: list[str] = []
    while isinstance(path, tuple):
        path, segment = path
        segments.append(f"[{segment}]" if isinstance(segment, int) else f".{segment}")
    return path + "".join(reversed(segments))


def _fail(path: Path, problem: str) -> DecodeError:
    return DecodeError(f"{_render(path)}: {problem}")


class _Decoder:
    """One decoding pass. Records whether the result can use the fast JCS path: no float,
    no integer beyond 2^53-1 and no member name outside the Basic Multilingual Plane."""

    def __init__(self) -> None:
        self.fast_path_safe = True

    def object(self, value: Any, fields: Fields, path: Path) -> dict[str, Any]:
        if not isinstance(value, JsonObject):
            raise _fail(path, "expected an object")
        decoded: dict[str, Any] = {}
        for name, member in value:
            if name in decoded:
                raise _fail((path, name), "repeated member name")
            spec = fields.get(name)
            if spec is None:
                raise _fail((path, name), "unknown member")
            presence, kind = spec
            if kind is STR and type(member) is str:  # most members: skip the dispatch
                if _NUL in member:
                    raise _fail((path, name), _NUL_REFUSED)
                decoded[name] = member
                continue
            if member is None and kind is not FREE:
                raise _fail((path, name), "null is not allowed (leave the member out)")
            if presence is FLAG and member is False:
                raise _fail((path, name), "a default false is left out, not written")
            if presence is LIST and isinstance(member, list) and not member:
                raise _fail((path, name), "a default empty array is left out, not written")
            decoded[name] = self.value(member, kind, (path, name))
        if len(decoded) < len(fields):
            for name, (presence, _) in fields.items():
                if presence == REQ and name not in decoded:
                    raise _fail((path, name), "required member missing")
        return decoded

    def value(self, value: Any, kind: Type, path: Path) -> Any:
        tag = kind[0]
        if tag == "str":
            if not isinstance(value, str):
                raise _fail(path, "expected a string")
            if _NUL in value:
                raise _fail(path, _NUL_REFUSED)
            return value
        if tag == "enum":
            if not isinstance(value, str) or value not in kind[1]:
                raise _fail(path, "not one of the allowed values")
            return value
        if tag == "obj":
            return self.object(value, kind[1], path)
        if tag == "arr":
            if not isinstance(value, list) or isinstance(value, JsonObject):
                raise _fail(path, "expected an array")
            return [self.value(item, kind[1], (path, i)) for i, item in enumerate(value)]
        if tag == "int":
            return self.typed_int(value, kind[1], path)
        if tag == "bool":
            if not isinstance(value, bool):
                raise _fail(path, "expected a boolean")
            return value
        if tag == "free_object":  # action.fields, the one place NUL is kept
            if not isinstance(value, JsonObject):
                raise _fail(path, "expected an object")
            return self.free(value, path, nul_allowed=True)
        if tag == "free":
            return self.free(value, path, nul_allowed=False)
        if tag == "surface":
            return self.surface(value, path)
        raise AssertionError(f"unknown schema type {tag}")  # pragma: no cover

    def typed_int(self, value: Any, maximum: int, path: Path) -> int:
        if not isinstance(value, JsonNumber) or not _TYPED_INT.fullmatch(value.text):
            raise _fail(path, "expected a non-negative integer literal")
        if len(value.text) > _TYPED_INT_MAX_DIGITS:  # before int() reads thousands of digits
            raise _fail(path, "integer out of range")
        number = int(value.text)
        if number > maximum:
            raise _fail(path, "integer out of range")
        if number >= _MAX_EXACT_DOUBLE_INT:
            self.fast_path_safe = False
        return number

    def free(self, value: Any, path: Path, *, nul_allowed: bool) -> Any:
        """A free-form value; numbers become the double the reference hashes.

        Integral doubles below 2^53 stay ``int`` (their JCS form is the same digits), so
        most content keeps the canonicalizer's fast path. NUL is refused in names and
        strings unless ``nul_allowed`` (inside ``action.fields``).
        """
        if isinstance(value, JsonObject):
            decoded: dict[str, Any] = {}
            for name, member in value:
                if name in decoded:
                    raise _fail((path, name), "repeated member name")
                if not nul_allowed and _NUL in name:
                    raise _fail((path, name), _NUL_REFUSED)
                if not name.isascii() and any(ord(char) > 0xFFFF for char in name):
                    self.fast_path_safe = False
                decoded[name] = self.free(member, (path, name), nul_allowed=nul_allowed)
            return decoded
        if isinstance(value, list):
            return [
                self.free(item, (path, index), nul_allowed=nul_allowed)
                for index, item in enumerate(value)
            ]
        if not nul_allowed and isinstance(value, str) and _NUL in value:
            raise _fail(path, _NUL_REFUSED)
        if isinstance(value, JsonNumber):
            number = float(value.text)
            if number in (_INFINITY, -_INFINITY):
                raise _fail(path, "number out of range")
            if number.is_integer() and abs(number) < _MAX_EXACT_DOUBLE_INT:
                return int(number)
            self.fast_path_safe = False
            return number
        return value

    def surface(self, value: Any, path: Path) -> Any:
        if isinstance(value, str):
            if value not in ("tool_description", "tool_result"):
                raise _fail(path, "not one of the allowed values")
            return value
        return self.object(value, {"argument": (REQ, obj({"path": (REQ, STR)}))}, path)


_INFINITY = float("inf")


def decode_envelope(value: Any) -> tuple[dict[str, Any], bool]:
    """The normalized receipt envelope and whether it is fast-path safe for JCS.

    Raises ``DecodeError`` naming the first problem.
    """
    decoder = _Decoder()
    envelope = decoder.object(value, ENVELOPE, "receipt")
    return envelope, decoder.fast_path_safe


def decode_content(value: Any) -> dict[str, Any]:
    """A normalized ``content`` object (used for approvals' ``action_content``)."""
    return _Decoder().object(value, CONTENT, "content")


def decode_approver_record(value: Any) -> dict[str, Any]:
    return _Decoder().object(value, APPROVER_RECORD, "record")
