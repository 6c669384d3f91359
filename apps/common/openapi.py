"""The OpenAPI 3 description of both profiles (drf-spectacular): shared pieces.

Each API view describes its own operation with ``@extend_schema`` built from the helpers
here; this module holds what the operations share: the named body schemas (components),
the two error contracts (key-scoped ``{"detail"}``, team-path ``{"error", "message"}``
with the code catalogue as an enum), the security schemes of the credentials, and the
post-processing hook that finishes one profile's document (title, the components it
references and nothing else, ``/metrics``, response headers).

A profile's document is generated from that profile's URL conf, so it lists exactly the
routes that deployment serves (``profile_document`` builds it without a request).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from copy import deepcopy
from http import HTTPStatus
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

Schema = dict[str, Any]

PROFILES = ("keyscoped", "teampath")
HEX64 = "^[0-9a-f]{64}$"

# --- Named body schemas (components). Each document carries only those it references. ---


def ref(name: str) -> Schema:
    """A reference to the named component (which must be in ``COMPONENTS``)."""
    assert name in COMPONENTS, name
    return {"$ref": f"#/components/schemas/{name}"}


def _object(
    properties: Schema, *, required: Iterable[str] = (), description: str = "", closed: bool = False
) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if description:
        schema["description"] = description
    if closed:
        schema["additionalProperties"] = False
    return schema


_STRING: Schema = {"type": "string"}
_HASH: Schema = {"type": "string", "pattern": HEX64, "description": "64 lowercase hex"}
_DATETIME: Schema = {"type": "string", "format": "date-time"}
_NULLABLE_DATETIME: Schema = {"type": "string", "format": "date-time", "nullable": True}

# Every `error` code a team-path answer can carry (docs/teampath-errors.md).
TEAMPATH_ERROR_CODES = (
    "invalid_json",
    "validation_failed",
    "bad_request",
    "batch_too_large",
    "unauthorized",
    "forbidden",
    "team_not_found",
    "policy_not_found",
    "approval_not_found",
    "not_found",
    "method_not_allowed",
    "not_acceptable",
    "chain_constraint",
    "payload_too_large",
    "receipt_rejected",
    "receipt_not_suspended",
    "token_rejected",
    "leg_rejected",
    "approval_settled",
    "approval_expired",
    "duplicate_vote",
    "content_mismatch",
    "roster_too_small",
    "quota_exceeded",
    "rate_limited",
    "internal_error",
    "over_capacity",
    # The transparency log (transparency.md §5.7).
    "checkpoint_not_found",
    "org_head_not_found",
    "receipt_not_found",
    "proof_pending",
    "tile_not_found",
    "witness_unknown",
    "cosignature_invalid",
)

VERDICT_KINDS_DOC = (
    "The verdict kind of server.md §2: `Malformed`, `HashMismatch`, `InvalidSignature`, "
    "`TrustLevelMismatch`, `WrongAlgorithm`, ..."
)

COMPONENTS: dict[str, Schema] = {
    # Shared by both profiles.
    "ActionReceipt": {
        "type": "object",
        "description": (
            "A full signed ActionReceipt (receipts.md), sent exactly as the SDK wrote it: the "
            "service parses it strictly (repeated or unknown members, `null` optionals and "
            "written-out defaults are refused) and re-verifies `content.action_hash`, the "
            "Ed25519 signatures and the trust level before anything is stored."
        ),
        "required": ["content"],
        "properties": {
            "content": {
                "type": "object",
                "description": "The signed content; `content.action_hash` is its BLAKE3 hash.",
                "additionalProperties": True,
            }
        },
        "additionalProperties": True,
    },
    "Health": _object({"status": {"type": "string", "enum": ["ok"]}}, required=["status"]),
    "Readiness": _object(
        {
            "status": {"type": "string", "enum": ["ready", "unavailable"]},
            "checks": {
                "type": "object",
                "description": "database, cache, migrations: each `ok` when ready.",
                "additionalProperties": {
                    "type": "string",
                    "enum": ["ok", "failed", "pending", "skipped"],
                },
            },
            "failed": {"type": "array", "items": _STRING, "description": "503 only"},
        },
        required=["status", "checks"],
    ),
    # Key-scoped profile.
    "Error": _object(
        {"detail": {"type": "string", "description": "What went wrong, for people."}},
        required=["detail"],
        description="The key-scoped error body: every non-2xx answer carries `detail`.",
    ),
    "ReceiptRefusal": _object(
        {"detail": _STRING, "kind": {"type": "string", "description": VERDICT_KINDS_DOC}},
        required=["detail"],
        description=(
            "A refused receipt: `detail` is `<kind>: <detail>`; `kind` names the verdict "
            "when re-verification failed (absent for chain constraints and refused supersedes)."
        ),
    ),
    "ReceiptPushRequest": _object(
        {
            "receipt": {"$ref": "#/components/schemas/ActionReceipt"},
            "supersedes_action_hash": {
                **_HASH,
                "description": "Only when finalizing an approval: the suspended L0 entry "
                "this freshly assembled L1 receipt supersedes.",
            },
        },
        required=["receipt"],
    ),
    "ReceiptPushResponse": _object(
        {
            "status": {"type": "string", "enum": ["appended", "duplicate"]},
            "entry_hash": {**_HASH, "description": "Echoes the receipt's `action_hash`."},
            "seq": {"type": "integer", "minimum": 1, "description": "Per-org mirror position."},
            "trust_level": {
                "type": "string",
                "enum": ["L0", "L1"],
                "description": "The level the service derived and stored (server.md §1).",
            },
            "claimed_trust_level": {
                "type": "string",
                "enum": ["L0", "L1"],
                "description": "The receipt's own claim, only where it differs (lifecycle links).",
            },
        },
        required=["status", "entry_hash", "seq", "trust_level"],
    ),
    "ReceiptQuotaExceeded": _object(
        {
            "status": {"type": "string", "enum": ["quota_exceeded"]},
            "entry_hash": _HASH,
            "seq": {"type": "integer", "nullable": True, "enum": [None]},
            "detail": _STRING,
        },
        required=["status", "entry_hash", "seq", "detail"],
        description="The org's monthly soft-cap is reached; the local chain is unaffected.",
    ),
    "PolicyPullResponse": _object(
        {
            "status": {"type": "string", "enum": ["policy"]},
            "policy_id": {"type": "string", "description": '`"pol_" + policy_hash[:24]`'},
            "policy_hash": {**_HASH, "description": "BLAKE3 of the TOML bytes as deployed."},
            "toml": {
                "type": "string",
                "description": 'The policy TOML; `""` is the fail-safe pin (no policy '
                "deployed: every action routes to a human).",
            },
        },
        required=["status", "policy_id", "policy_hash", "toml"],
    ),
    "PolicyDeployRequest": _object(
        {
            "toml": {"type": "string", "description": "The full policy TOML, never trimmed."},
            "expected_policy_hash": {
                **_HASH,
                "description": "Optimistic concurrency: deploy only if this is the active pin.",
            },
        },
        required=["toml"],
    ),
    "PolicyParseError": _object(
        {"detail": _STRING, "result": {"type": "string", "enum": ["parse_error"]}},
        required=["detail"],
    ),
    "PolicyConflict": _object(
        {
            "detail": _STRING,
            "result": {"type": "string", "enum": ["floor_bypass"]},
            "rule_id": {
                "type": "string",
                "nullable": True,
                "description": "floor bypass: the rule that would bypass it",
            },
            "active_policy_hash": {**_HASH, "description": "stale pin: the active one"},
        },
        required=["detail"],
        description="A floor-bypass attempt (`result`, `rule_id`) or a stale "
        "`expected_policy_hash` (`active_policy_hash`).",
    ),
    "PolicyPreviewRequest": _object(
        {
            "toml": {"type": "string", "description": "The draft policy TOML."},
            "days": {"type": "integer", "minimum": 1, "default": 7},
        },
        required=["toml"],
    ),
    "DecisionStep": _object(
        {"decision_path": _STRING, "rule_id": _STRING}, required=["decision_path", "rule_id"]
    ),
    "DecisionChange": _object(
        {
            "seq": {"type": "integer"},
            "action_hash": _STRING,
            "verb": _STRING,
            "workflow": _STRING,
            "before": {"$ref": "#/components/schemas/DecisionStep"},
            "after": {"$ref": "#/components/schemas/DecisionStep"},
        },
        required=["seq", "action_hash", "verb", "workflow", "before", "after"],
    ),
    "PolicyPreview": _object(
        {
            "days": {"type": "integer"},
            "considered": {"type": "integer", "minimum": 0},
            "changed": {"type": "integer", "minimum": 0},
            "unchanged": {"type": "integer", "minimum": 0},
            "rule_only_changed": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
            "transitions": {
                "type": "object",
                "description": 'Counts per `"<before> -> <after>"` decision change.',
                "additionalProperties": {"type": "integer"},
            },
            "sample": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/DecisionChange"},
                "maxItems": 20,
            },
        },
        required=[
            "days",
            "considered",
            "changed",
            "unchanged",
            "rule_only_changed",
            "truncated",
            "transitions",
            "sample",
        ],
    ),
    "ApprovalOpenRequest": _object(
        {
            "action_hash": {
                **_HASH,
                "description": "The suspended content's action_hash, or the SDK's suspend ticket.",
            },
            "rule_id": {
                "type": "string",
                "maxLength": 200,
                "description": (
                    'The scope the approver token must cover; `""` means absent (the suspended '
                    "content's `policy.rule_id`)."
                ),
            },
            "threshold": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
            "workflow": {"type": "string", "description": "Display context."},
            "account": {"type": "string", "description": "Display context."},
            "matched_conditions": {
                "type": "array",
                "items": {},
                "maxItems": 100,
                "description": "Display context.",
            },
            "scope": {"type": "string", "maxLength": 200, "description": "Display context."},
        },
        required=["action_hash"],
    ),
    "ApprovalView": _object(
        {
            "approval_id": {"type": "string", "description": '`"apr_"` + random'},
            "action_hash": _HASH,
            "status": {"type": "string", "enum": ["pending", "approved", "rejected", "expired"]},
            "threshold": {"type": "integer", "minimum": 1},
            "approved_count": {"type": "integer", "minimum": 0},
            "resolved_at": {**_NULLABLE_DATETIME, "description": "null while pending"},
        },
        required=[
            "approval_id",
            "action_hash",
            "status",
            "threshold",
            "approved_count",
            "resolved_at",
        ],
    ),
    "SubmitTokenRequest": _object(
        {
            "token_b64": {
                "type": "string",
                "format": "byte",
                "description": "The approval token's wire bytes, base64.",
            },
            "action_content": {
                "type": "object",
                "description": "The suspended receipt's content the token signs over.",
                "additionalProperties": True,
            },
            "decision": {
                "type": "string",
                "enum": ["approved", "rejected"],
                "description": "Must match the token's signed decision (else 403).",
            },
            "reason": {"type": "string", "maxLength": 2000, "description": "Display context."},
            "required_scope": {
                "type": "string",
                "description": "Ignored: the scope is bound to the approval's rule server-side.",
            },
            "record": {
                "type": "string",
                "description": "A co-signed leg: the ApproverRecord, JSON text (with co_sig_b64).",
            },
            "co_sig_b64": {"type": "string", "description": "The leg's signature, base64."},
        },
        required=["token_b64", "action_content"],
    ),
    "ApprovalAssembly": _object(
        {
            "legs": {
                "type": "array",
                "items": _object(
                    {"record": _STRING, "approver_pubkey_b64": _STRING, "co_sig_b64": _STRING},
                    required=["record", "approver_pubkey_b64", "co_sig_b64"],
                ),
            },
            "threshold": {"type": "integer", "minimum": 1},
            "roster": {"type": "array", "items": _STRING},
            "suspended_content": {"type": "object", "additionalProperties": True},
        },
        required=["legs", "threshold", "roster", "suspended_content"],
        description="What the SDK assembles the L1 receipt from (approvals.md §8).",
    ),
    "ApproverKeyRegisterRequest": _object(
        {
            "public_key": {
                "type": "string",
                "maxLength": 100,
                "description": "Ed25519 public key, base64 (32 bytes).",
            },
            "key_id": {"type": "string", "maxLength": 100},
            "label": {"type": "string", "maxLength": 200},
        },
        required=["public_key"],
    ),
    "ApproverKey": _object(
        {
            "status": {"type": "string", "enum": ["registered"]},
            "key_id": _STRING,
            "public_key": _STRING,
            "label": _STRING,
            "change": {
                "type": "string",
                "enum": ["registered", "unchanged", "rotated"],
                "description": "What the upsert did; a rotation revoked the key id's old key.",
            },
        },
        required=["status", "key_id", "public_key", "label", "change"],
    ),
    "AuditChainEntry": _object(
        {
            "seq": {"type": "integer", "minimum": 1},
            "action_hash": _STRING,
            "kind": _STRING,
            "trust_level": {"type": "string", "enum": ["L0", "L1"]},
            "claimed_trust_level": {
                "type": "string",
                "enum": ["", "L0", "L1"],
                "description": "The receipt's own claim where it differs from `trust_level`.",
            },
            "receipt_digest": {**_STRING, "description": "BLAKE3 of `receipt`."},
            "supersedes_action_hash": {"type": "string", "nullable": True},
            "superseded_by": {"type": "string", "nullable": True},
            "prev_chain_hash": _STRING,
            "chain_hash": {**_STRING, "description": "server.md §3 link hash."},
            "received_at": _DATETIME,
            "receipt": {"type": "string", "description": "The stored receipt (JCS text)."},
        },
        required=[
            "seq",
            "action_hash",
            "kind",
            "trust_level",
            "receipt_digest",
            "supersedes_action_hash",
            "superseded_by",
            "prev_chain_hash",
            "chain_hash",
            "received_at",
            "receipt",
        ],
    ),
    "AuditChain": _object(
        {
            "head": {"type": "string", "description": "The newest chain_hash (64 zeros: empty)."},
            "size": {"type": "integer", "minimum": 0},
            "entries": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/AuditChainEntry"},
                "description": "Newest first.",
            },
            "next": {
                "type": "integer",
                "nullable": True,
                "description": "Pass as `before` for the next (older) page; null at the end.",
            },
        },
        required=["head", "size", "entries", "next"],
    ),
    "StatCounter": _object(
        {
            "key": _STRING,
            "label": _STRING,
            "value": {"type": "number", "nullable": True},
            "display": _STRING,
            "spark": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "Daily series, 30 days, oldest first.",
            },
        },
        required=["key", "label", "value", "display", "spark"],
    ),
    "ConsoleTokenRequest": _object(
        {"org": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"}}, required=["org"]
    ),
    "ConsoleTokenRefreshRequest": _object({"refresh": _STRING}, required=["refresh"]),
    "ConsoleTokenPair": _object(
        {
            "access": {"type": "string", "description": "Session JWT for the dashboard plane."},
            "refresh": _STRING,
            "access_expires_at": _DATETIME,
            "role": {"type": "string", "enum": ["viewer", "auditor", "manager", "owner"]},
        },
        required=["access", "refresh", "access_expires_at", "role"],
    ),
    # Team-path profile.
    "TeamPathError": _object(
        {
            "error": {
                "type": "string",
                "enum": list(TEAMPATH_ERROR_CODES),
                "description": "Match on this code, never on `message` (docs/teampath-errors.md).",
            },
            "message": _STRING,
        },
        required=["error", "message"],
        description="The team-path error body of every non-2xx answer.",
    ),
    "OutboxPushResult": _object(
        {
            "receiptId": {
                "type": "string",
                "description": 'The receipt\'s `content.action_hash` ("" when it has none).',
            },
            "accepted": {"type": "boolean"},
            "trustLevel": {
                "type": "string",
                "enum": ["L0", "L1"],
                "description": "Only when accepted: the level the service derived and stored.",
            },
            "claimedTrustLevel": {
                "type": "string",
                "enum": ["L0", "L1"],
                "description": "Only where the receipt's own claim differs (lifecycle links).",
            },
            "rejectionReason": {
                "type": "string",
                "description": 'Only when refused: `"<kind>: <detail>"` (e.g. `Malformed: ...`).',
            },
        },
        required=["receiptId", "accepted"],
    ),
    "ReceiptBatchRequest": _object(
        {
            "receipts": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/ActionReceipt"},
                "minItems": 1,
                "maxItems": settings.TEAMPATH_BATCH_MAX,
            }
        },
        required=["receipts"],
        closed=True,
    ),
    "PolicyRule": _object(
        {
            "id": _STRING,
            "order": {"type": "integer"},
            "enabled": {"type": "boolean"},
            "subject": _object(
                {
                    "kind": {"type": "string", "enum": ["any", "workflow", "account"]},
                    "value": _STRING,
                },
                required=["kind"],
            ),
            "verb": _STRING,
            "scope": _STRING,
            "decision": _STRING,
            "conditions": {
                "type": "array",
                "items": _object(
                    {
                        "field": _STRING,
                        "op": _STRING,
                        "value": {"description": "Any JSON value."},
                        "display": {"type": "string", "nullable": True},
                    },
                    required=["field", "op", "value", "display"],
                ),
            },
            "approvers": {"type": "array", "items": _STRING},
            "slaMinutes": {"type": "integer", "nullable": True},
            "clientClearable": {"type": "boolean"},
        },
        required=[
            "id",
            "order",
            "enabled",
            "subject",
            "verb",
            "scope",
            "decision",
            "conditions",
            "approvers",
            "slaMinutes",
            "clientClearable",
        ],
        description="One rule of the active policy (policy.md §8 rendering).",
    ),
    "PolicyBundle": _object(
        {
            "version": {"type": "string", "description": "The active policy id; pin against it."},
            "rules": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/PolicyRule"},
                "description": "Evaluation order, first match wins.",
            },
            "fetchedAt": _DATETIME,
        },
        required=["version", "rules", "fetchedAt"],
    ),
    "OpenApprovalRequest": _object(
        {
            "receipt": {"$ref": "#/components/schemas/ActionReceipt"},
            "routingHint": {"type": "string", "maxLength": 200},
        },
        required=["receipt"],
        closed=True,
    ),
    "OpenApprovalResult": _object(
        {
            "approvalId": _STRING,
            "token": {
                "type": "string",
                "description": "One-time approver token; only in the 201 answer.",
            },
            "expiresAt": _DATETIME,
        },
        required=["approvalId", "expiresAt"],
    ),
    "ApprovalVote": _object(
        {
            "approverPublicKey": _STRING,
            "decision": {"type": "string", "enum": ["approved", "rejected"]},
            "votedAt": _DATETIME,
        },
        required=["approverPublicKey", "decision", "votedAt"],
    ),
    "Approval": _object(
        {
            "approvalId": _STRING,
            "actionHash": {**_HASH, "description": "The suspended receipt's action_hash."},
            "receiptId": {**_HASH, "description": "The same as `actionHash`."},
            "decision": {
                "type": "string",
                "nullable": True,
                "enum": ["approved", "rejected", "expired", None],
                "description": "The settled decision; null while pending.",
            },
            "approverPublicKey": {
                "type": "string",
                "nullable": True,
                "description": "The key whose vote settled it; null while pending or expired.",
            },
            "outcome": {"type": "string", "enum": ["pending", "approved", "rejected", "expired"]},
            "threshold": {"type": "integer", "minimum": 1},
            "approvedCount": {"type": "integer", "minimum": 0},
            "routingHint": {"type": "string", "nullable": True},
            "createdAt": _DATETIME,
            "expiresAt": _NULLABLE_DATETIME,
            "decidedAt": _NULLABLE_DATETIME,
            "votes": {"type": "array", "items": {"$ref": "#/components/schemas/ApprovalVote"}},
        },
        required=[
            "approvalId",
            "actionHash",
            "receiptId",
            "decision",
            "approverPublicKey",
            "outcome",
            "threshold",
            "approvedCount",
            "routingHint",
            "createdAt",
            "expiresAt",
            "decidedAt",
            "votes",
        ],
    ),
    "PollApprovalResult": _object(
        {
            "outcome": {"type": "string", "enum": ["pending", "approved", "rejected", "expired"]},
            "approval": {
                "allOf": [{"$ref": "#/components/schemas/Approval"}],
                "description": "Present once settled.",
            },
        },
        required=["outcome"],
    ),
    "TokenSubmitRequest": _object(
        {
            "token": {
                "type": "string",
                "format": "byte",
                "description": "The approver's signed approval token, base64 (approvals.md §3).",
            }
        },
        required=["token"],
        closed=True,
    ),
    "ReceiptRefusalMembers": _object(
        {
            "receiptId": _STRING,
            "accepted": {"type": "boolean", "enum": [False]},
            "rejectionReason": _STRING,
        },
        description="The OutboxPushResult members a refusal of the receipt carries.",
    ),
}


# --- Responses -----------------------------------------------------------------------


def ok(schema: Schema | str, description: str = "") -> OpenApiResponse:
    """A success answer whose body is ``schema`` (a component name or a raw schema)."""
    return OpenApiResponse(
        response=ref(schema) if isinstance(schema, str) else schema, description=description
    )


def json_body(name: str) -> dict[str, Schema]:
    """A JSON request body (``extend_schema(request=...)``) of the named component."""
    return {"application/json": ref(name)}


def list_of(name: str) -> Schema:
    return {"type": "array", "items": ref(name)}


_KEYSCOPED_DEFAULTS: dict[int, str] = {
    401: "No credential, or one that is unknown, revoked or of the other plane's kind.",
    403: "The credential lacks the route's scope (API key) or role (session JWT).",
    413: "The body is larger than the route allows.",
    422: "The body is not JSON, not `application/json`, or fails validation.",
    429: "Rate limited: retry after `Retry-After` seconds.",
    503: "Briefly at capacity or the database is unreachable: retry after `Retry-After`.",
}


def keyscoped_errors(
    *statuses: int, credential: bool = True, **special: OpenApiResponse
) -> dict[int, OpenApiResponse]:
    """``{"detail"}`` error answers for ``statuses`` (429 and 503 always, 401 with a
    ``credential``), plus ``special`` ones keyed ``s<status>`` (``s409=keyscoped_error(...)``)."""
    always = {401, 429, 503} if credential else {429, 503}
    codes = sorted({*always, *statuses} - {int(key[1:]) for key in special})
    answers = {
        status: OpenApiResponse(
            response=ref("Error"),
            description=_KEYSCOPED_DEFAULTS.get(status, HTTPStatus(status).phrase),
        )
        for status in codes
    }
    answers.update({int(key[1:]): response for key, response in special.items()})
    return dict(sorted(answers.items()))


def keyscoped_error(description: str, schema: str = "Error") -> OpenApiResponse:
    return OpenApiResponse(response=ref(schema), description=description)


def teampath_error(
    codes: Iterable[str], description: str = "", *, members: Schema | None = None
) -> OpenApiResponse:
    """A team-path error answer whose ``error`` is one of ``codes`` (each in the catalogue)."""
    codes = list(codes)
    unknown = set(codes) - set(TEAMPATH_ERROR_CODES)
    assert not unknown, unknown
    parts: list[Schema] = [ref("TeamPathError"), {"properties": {"error": {"enum": codes}}}]
    if members is not None:
        parts.append(members)
    text = "`error`: " + ", ".join(f"`{code}`" for code in codes)
    return OpenApiResponse(
        response={"allOf": parts}, description=f"{description}. {text}" if description else text
    )


def receipt_refusal(required: bool) -> Schema:
    """The OutboxPushResult members beside ``error``/``message`` of a refused receipt."""
    members: Schema = {"allOf": [ref("ReceiptRefusalMembers")]}
    if required:
        members["required"] = ["receiptId", "accepted", "rejectionReason"]
    return members


def teampath_errors(
    *, body: bool = False, **by_status: OpenApiResponse
) -> dict[int, OpenApiResponse]:
    """Team-path error answers: 401, 403, 429 and 503 always, 400 and 413 for a route with
    a ``body``, plus (overriding those) ``s<status>=teampath_error(...)``."""
    no_key = "No `Authorization: Bearer <API key>`, an unknown or revoked key, or another kind"
    answers = {
        401: teampath_error(["unauthorized"], no_key),
        403: teampath_error(["forbidden"], "The key lacks the route's scope"),
        429: teampath_error(["rate_limited"], "Over the plan's request rate; see `Retry-After`"),
        503: teampath_error(["over_capacity"], "Briefly at capacity; see `Retry-After`"),
    }
    if body:
        answers[400] = teampath_error(
            ["invalid_json", "validation_failed"], "Not JSON, or the wrong shape"
        )
        answers[413] = teampath_error(["payload_too_large"], "The body is too large")
    answers.update({int(key[1:]): response for key, response in by_status.items()})
    return dict(sorted(answers.items()))


def path_parameter(name: str, description: str, pattern: str | None = None) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        {"type": "string", **({"pattern": pattern} if pattern else {})},
        OpenApiParameter.PATH,
        description=description,
    )


# --- Security schemes ----------------------------------------------------------------


class SdkApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Key-scoped SDK plane: ``x-api-key`` or ``Authorization: Bearer``, either one."""

    target_class = "apps.tenancy.authentication.ApiKeyAuthentication"
    name = ["ApiKeyHeader", "ApiKeyBearer"]
    priority = 1

    def get_security_requirement(self, auto_schema: AutoSchema) -> list[dict[str, list[Any]]]:
        return [{"ApiKeyHeader": []}, {"ApiKeyBearer": []}]

    def get_security_definition(self, auto_schema: AutoSchema) -> list[Schema]:
        return [
            {
                "type": "apiKey",
                "in": "header",
                "name": "x-api-key",
                "description": "An API key (`hk_...`), scoped; same as `ApiKeyBearer`.",
            },
            {
                "type": "http",
                "scheme": "bearer",
                "bearerFormat": "API key",
                "description": "`Authorization: Bearer <API key>`; same as `ApiKeyHeader`.",
            },
        ]


class DashboardJwtScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "apps.tenancy.authentication.ConsoleJwtAuthentication"
    name = "SessionJwt"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> Schema:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "A console session JWT (`POST /v1/console/token`); API keys never "
            "pass here. The member's role is re-read on every request.",
        }


class TeamPathApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "apps.common.teampath.BearerApiKeyAuthentication"
    name = "BearerApiKey"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> Schema:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "API key",
            "description": "`Authorization: Bearer <API key>`, the team's key; nothing else.",
        }


# --- The document of one profile -----------------------------------------------------

_INFO = {
    "keyscoped": {
        "title": "Countersign: key-scoped profile",
        "description": (
            "Receipt mirror, policy and human approvals; the org is resolved from the API "
            "key. SDK plane: API key (`x-api-key` or `Authorization: Bearer`), scoped. "
            "Dashboard plane: console session JWT (`Authorization: Bearer`), by role. Every "
            'non-2xx body is `{"detail": ...}` (some carry more members, named per answer).'
        ),
    },
    "teampath": {
        "title": "Countersign: team-path profile",
        "description": (
            "Policy per team, receipts to an outbox (with a batch route), approvals keyed by "
            "id. Every request carries `Authorization: Bearer <API key>`. Every non-2xx body "
            'is `{"error": <code>, "message": ...}`; the `error` codes are the enum of '
            "`TeamPathError` (docs/teampath-errors.md)."
        ),
    },
}

_METRICS_PATH: Schema = {
    "get": {
        "operationId": "metrics",
        "summary": "Prometheus metrics",
        "description": "Served when `METRICS_ENABLED` and to `METRICS_ALLOWED_IPS` only.",
        "tags": ["operations"],
        "security": [],
        "responses": {
            "200": {
                "description": "Prometheus text exposition format.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            "403": {"description": "Not served to this address (profile error body)."},
            "404": {"description": "Metrics are disabled (profile error body)."},
        },
    }
}

_RETRY_AFTER: Schema = {
    "description": "Seconds to wait before retrying.",
    "schema": {"type": "integer", "minimum": 1},
}
_WWW_AUTHENTICATE: Schema = {
    "description": "The Bearer challenge.",
    "schema": {"type": "string"},
}


def profile_title(profile: str) -> str:
    return _INFO[profile]["title"]


def profile_of(urlconf: object) -> str:
    """The profile whose root URL conf ``urlconf`` is (a module, a dotted name or None)."""
    name = getattr(urlconf, "__name__", urlconf) or settings.ROOT_URLCONF
    for profile in PROFILES:
        if str(name) == f"config.urls.{profile}":
            return profile
    return str(settings.API_PROFILE)


def _references(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        target = value.get("$ref")
        if isinstance(target, str) and target.startswith("#/components/schemas/"):
            yield target.rsplit("/", 1)[1]
        for item in value.values():
            yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def _referenced_components(paths: Schema) -> dict[str, Schema]:
    found: dict[str, Schema] = {}
    pending = list(_references(paths))
    while pending:
        name = pending.pop()
        if name in found or name not in COMPONENTS:
            continue
        found[name] = deepcopy(COMPONENTS[name])
        pending.extend(_references(found[name]))
    return dict(sorted(found.items()))


def _finish_operations(paths: Schema) -> None:
    """Every request body described here is required; error answers name their headers."""
    for operations in paths.values():
        for operation in operations.values():
            if "requestBody" in operation:
                operation["requestBody"]["required"] = True
            for status, response in operation.get("responses", {}).items():
                if not response.get("description"):
                    response["description"] = HTTPStatus(int(status)).phrase
                headers = response.setdefault("headers", {})
                if status in ("429", "503"):
                    headers["Retry-After"] = deepcopy(_RETRY_AFTER)
                if status == "401":
                    headers["WWW-Authenticate"] = deepcopy(_WWW_AUTHENTICATE)
                if not headers:
                    del response["headers"]


def finish_profile_document(
    result: Schema, generator: SchemaGenerator, request: object, public: bool
) -> Schema:
    """drf-spectacular post-processing hook: one profile's finished document."""
    profile = profile_of(getattr(generator, "urlconf", None))
    result["info"].update(_INFO[profile])
    paths: Schema = result.setdefault("paths", {})
    paths["/metrics"] = deepcopy(_METRICS_PATH)
    _finish_operations(paths)
    components = result.setdefault("components", {})
    components["schemas"] = {
        **components.get("schemas", {}),
        **_referenced_components(paths),
    }
    result["paths"] = dict(sorted(paths.items()))
    return result


def profile_document(profile: str) -> Schema:
    """The OpenAPI document of ``profile``, as ``GET /v1/schema`` serves it there."""
    generator = SchemaGenerator(urlconf=f"config.urls.{profile}")  # type: ignore[no-untyped-call]
    document: Schema = generator.get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return document
