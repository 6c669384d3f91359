"""OpenAPI components of outbound events (apps.events): each event type's payload and the
Standard Webhooks envelope they travel in. They are sent, not served, so no view's
serializer describes them; the routes that manage endpoints and deliveries describe their
bodies with serializers (``apps.api.keyscoped.events``). Merged into
``apps.api.openapi.COMPONENTS``; every profile's document carries ``WebhookEvent`` and
what it references."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

_HASH: Schema = {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "64 lowercase hex"}
_STR: Schema = {"type": "string"}
_NSTR: Schema = {"type": "string", "nullable": True}
_DT: Schema = {"type": "string", "format": "date-time"}
_NDT: Schema = {"type": "string", "format": "date-time", "nullable": True}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(props: Schema, required: list[str], description: str = "") -> Schema:
    schema: Schema = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if description:
        schema["description"] = description
    return schema


_APPROVAL_MEMBERS: Schema = {
    "approval_id": {"type": "string", "example": "apr_3k2…"},
    "action_hash": _HASH,
    "ticket_hash": {**_HASH, "nullable": True, "description": "The suspend ticket, once known."},
    "status": {
        "type": "string",
        "enum": ["pending", "approved", "rejected", "expired", "decided_locally"],
    },
    "threshold": {"type": "integer", "minimum": 1},
    "approved_count": {"type": "integer", "minimum": 0},
    "rule_id": _NSTR,
    "expires_at": _NDT,
    "on_timeout": _NSTR,
    "signing_url": {
        "type": "string",
        "format": "uri",
        "description": "The console page where an approver reviews and signs this approval.",
    },
    "summary": {**_ref("ApprovalContentSummary"), "nullable": True},
}
_APPROVAL_REQUIRED = list(_APPROVAL_MEMBERS)


def _approval(extra: Schema, required: list[str], description: str) -> Schema:
    return _obj({**_APPROVAL_MEMBERS, **extra}, [*_APPROVAL_REQUIRED, *required], description)


def _envelope(event_type: str, data: str) -> Schema:
    return _obj(
        {
            "type": {"type": "string", "enum": [event_type]},
            "timestamp": {**_DT, "description": "When the event happened."},
            "data": _ref(data),
        },
        ["type", "timestamp", "data"],
        f"The body of a `{event_type}` webhook (Standard Webhooks envelope). Its `webhook-id` "
        "header is the event's id, the same on every attempt.",
    )


_PAYLOADS: dict[str, Schema] = {
    "ApprovalContentSummary": _obj(
        {
            "agent_identity": _NSTR,
            "kind": _NSTR,
            "trust_level": _NSTR,
            "action": _obj(
                {
                    "workflow": _NSTR,
                    "verb": _NSTR,
                    "account": _NSTR,
                    "field_names": {"type": "array", "items": _STR},
                },
                ["workflow", "verb", "account", "field_names"],
            ),
            "policy": _obj(
                {"rule_id": _NSTR, "rule_display": _NSTR, "decision_path": _NSTR},
                ["rule_id", "rule_display", "decision_path"],
            ),
        },
        ["agent_identity", "kind", "trust_level", "action", "policy"],
        "What the suspended action is: who, which workflow and verb, which rule (the names "
        "of its fields, never their values). Null until the content is known.",
    ),
    "ApprovalOpenedEvent": _approval(
        {}, [], "An approval was opened (possibly provisionally, by a suspended push)."
    ),
    "ApprovalWaitingEvent": _approval(
        {}, [], "The approval is open and confirmed: approvers can sign it now."
    ),
    "ApprovalVoteRecordedEvent": _approval(
        {
            "decision": {"type": "string", "enum": ["approved", "rejected"]},
            "approver_public_key": _STR,
        },
        ["decision", "approver_public_key"],
        "One approver's signed vote was counted.",
    ),
    "ApprovalDecidedEvent": _approval(
        {
            "outcome": {
                "type": "string",
                "enum": ["approved", "rejected", "expired", "decided_locally"],
            },
            "reason": {"type": "string", "enum": ["votes", "expired", "decision_link"]},
        },
        ["outcome", "reason"],
        "The approval is settled: by votes, by its expiry (`on_timeout` deny: rejected), or "
        "closed by the agent's own unsigned decision link (`decided_locally`: no human "
        "decision recorded).",
    ),
    "ReceiptRefusedEvent": _obj(
        {
            "kind": {"type": "string", "description": "The verdict kind (or `Malformed`)."},
            "action_hash": {**_HASH, "nullable": True, "description": "As the receipt names it."},
            "refused_at": _DT,
        },
        ["kind", "action_hash", "refused_at"],
        "A pushed receipt was refused. Nothing of the receipt beyond its action hash.",
    ),
    "PolicyDeployedEvent": _obj(
        {
            "policy_id": _STR,
            "policy_hash": _HASH,
            "previous_policy_hash": _HASH,
            "rule_count": {"type": "integer"},
            "channel": _STR,
            "deployed_by": _NSTR,
            "deployed_at": _DT,
        },
        [
            "policy_id",
            "policy_hash",
            "previous_policy_hash",
            "rule_count",
            "channel",
            "deployed_by",
            "deployed_at",
        ],
        "A policy became the org's active policy.",
    ),
    "QuotaThresholdEvent": _obj(
        {
            "month": {"type": "string", "example": "2026-11"},
            "threshold_percent": {"type": "integer", "enum": [80, 100]},
            "count": {"type": "integer"},
            "cap": {"type": "integer"},
        },
        ["month", "threshold_percent", "count", "cap"],
        "The month's mirrored receipts reached 80% or 100% of the monthly cap (once each).",
    ),
    "ApiKeyEvent": _obj(
        {
            "prefix": _STR,
            "label": _STR,
            "scopes": {"type": "array", "items": _STR},
            "created_at": _DT,
            "revoked_at": _NDT,
        },
        ["prefix", "label", "scopes", "created_at", "revoked_at"],
        "An SDK API key was created or revoked (never the key itself).",
    ),
    "TransparencyAlertEvent": _obj(
        {
            "alert": {**_STR, "description": "What monitor_log found (a fork, a rollback, ...)."},
            "log": {**_STR, "description": "The log's base URL the monitor followed."},
            "observed_at": _DT,
        },
        ["alert", "log", "observed_at"],
        "The transparency log's monitor found it inconsistent; for the org an alert names, or "
        "for every org when it concerns the whole log.",
    ),
}

_ENVELOPES = {
    "approval.opened": ("ApprovalOpenedWebhook", "ApprovalOpenedEvent"),
    "approval.waiting_for_approvers": ("ApprovalWaitingWebhook", "ApprovalWaitingEvent"),
    "approval.vote_recorded": ("ApprovalVoteRecordedWebhook", "ApprovalVoteRecordedEvent"),
    "approval.decided": ("ApprovalDecidedWebhook", "ApprovalDecidedEvent"),
    "receipt.refused": ("ReceiptRefusedWebhook", "ReceiptRefusedEvent"),
    "policy.deployed": ("PolicyDeployedWebhook", "PolicyDeployedEvent"),
    "quota.threshold": ("QuotaThresholdWebhook", "QuotaThresholdEvent"),
    "api_key.created": ("ApiKeyCreatedWebhook", "ApiKeyEvent"),
    "api_key.revoked": ("ApiKeyRevokedWebhook", "ApiKeyEvent"),
    "transparency.alert": ("TransparencyAlertWebhook", "TransparencyAlertEvent"),
}

EVENT_COMPONENTS: dict[str, Schema] = {
    **_PAYLOADS,
    **{name: _envelope(kind, data) for kind, (name, data) in _ENVELOPES.items()},
    "WebhookEvent": {
        "oneOf": [_ref(name) for name, _ in _ENVELOPES.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {
                kind: f"#/components/schemas/{name}" for kind, (name, _) in _ENVELOPES.items()
            },
        },
        "description": "Any webhook body (`format` `standard`), signed per Standard Webhooks: "
        "`webhook-id`, `webhook-timestamp`, `webhook-signature` (`v1,<base64 HMAC-SHA256>` of "
        "`{id}.{timestamp}.{body}`; during a secret rotation two, space-separated). A `slack` "
        'endpoint receives `{"text": ...}` instead.',
    },
}
