"""The OpenAPI 3 description of both profiles (drf-spectacular): what cannot be inferred.

Every request and response body is inferred by drf-spectacular from the API views' nested
serializers (``apps/api``). This module keeps only what no serializer says: the error
components of the two contracts (key-scoped ``{"detail"}`` and its refusals with extra
members, team-path ``{"error", "message"}`` with the code catalogue as an enum), which the
exception handlers build; the signed receipt, which the strict decoder reads, not a
serializer; the webhook bodies (``openapi_events``, from serializers no view answers with,
as they are sent, not served); the
helpers that state an operation's statuses; the security schemes of the credentials; and
the post-processing hook that finishes one profile's document (title, the components it
references, ``/metrics``, response headers).

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
from rest_framework.serializers import BaseSerializer, CharField, Field

from apps.api.catalogue import teampath_error_codes
from apps.api.openapi_events import EVENT_COMPONENT_NAMES, event_components

Schema = dict[str, Any]

PROFILES = ("keyscoped", "teampath")
HEX64 = "^[0-9a-f]{64}$"

# --- Components no serializer describes. Each document carries only those it references. ---


def ref(name: str) -> Schema:
    """A reference to the named component (in ``COMPONENTS``, or a webhook body's)."""
    assert name in COMPONENTS or name in EVENT_COMPONENT_NAMES, name
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: Schema, *, required: Iterable[str] = (), description: str = "") -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if description:
        schema["description"] = description
    return schema


_STRING: Schema = {"type": "string"}
_HASH: Schema = {"type": "string", "pattern": HEX64, "description": "64 lowercase hex"}

# Every `error` code a team-path answer can carry: the catalogue's (docs/teampath-errors.md).
TEAMPATH_ERROR_CODES = teampath_error_codes()

VERDICT_KINDS_DOC = (
    "The verdict kind of server.md §2: `Malformed`, `HashMismatch`, `InvalidSignature`, "
    "`TrustLevelMismatch`, `WrongAlgorithm`, ..."
)

COMPONENTS: dict[str, Schema] = {
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
            "open_policy_id": {
                "type": "string",
                "description": "another proposal is open: its policy_id",
            },
        },
        required=["detail"],
        description="A floor-bypass attempt (`result`, `rule_id`), a stale "
        "`expected_policy_hash` (`active_policy_hash`), or another open proposal "
        "(`open_policy_id`).",
    ),
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


def ok(schema: Schema | str | type | BaseSerializer[Any], description: str = "") -> OpenApiResponse:
    """A success answer whose body is ``schema`` (a serializer, a component name or a raw
    schema)."""
    return OpenApiResponse(
        response=ref(schema) if isinstance(schema, str) else schema, description=description
    )


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


# --- Inference ------------------------------------------------------------------------


class ProfileAutoSchema(AutoSchema):
    """drf-spectacular's inference, plus what a request body's serializer refuses and the
    default leaves unsaid: a string member that may not be blank is ``minLength: 1`` (answers
    are left alone: an output string may well be empty), and a serializer marked
    ``refuses_unknown_members`` is a closed object (``additionalProperties: false``)."""

    def _map_basic_serializer(self, serializer: BaseSerializer[Any], direction: str) -> Schema:
        schema: Schema = super()._map_basic_serializer(serializer, direction)  # type: ignore[no-untyped-call]
        if getattr(serializer, "refuses_unknown_members", False):
            schema["additionalProperties"] = False
        return schema

    def _get_serializer_field_meta(
        self, field: Field[Any, Any, Any, Any], direction: str
    ) -> Schema:
        meta: Schema = super()._get_serializer_field_meta(field, direction)  # type: ignore[no-untyped-call]
        if direction == "request" and isinstance(field, CharField) and not field.allow_blank:
            meta.setdefault("minLength", 1)
        return meta


# --- Security schemes ----------------------------------------------------------------


class SdkApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Key-scoped SDK plane: ``x-api-key`` or ``Authorization: Bearer``, either one."""

    target_class = "apps.api.authentication.ApiKeyAuthentication"
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
    target_class = "apps.api.authentication.ConsoleJwtAuthentication"
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
    target_class = "apps.api.teampath.base.BearerApiKeyAuthentication"
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

# What every JSON body is held to whatever its schema (apps.common.json_text): a JSON
# Schema cannot say it of the free-form members, so the description does.
_JSON_BODY_RULES = (
    " Every JSON body, free-form members included: UTF-8, at most 128 nested arrays and "
    "objects, no repeated member name, no U+0000 in a string or name, integers from -2^63 to "
    "2^64-1 (else 422 key-scoped, 400 team-path)."
)

_INFO = {
    "keyscoped": {
        "title": "Countersign: key-scoped profile",
        "description": (
            "Receipt mirror, policy and human approvals; the org is resolved from the API "
            "key. SDK plane: API key (`x-api-key` or `Authorization: Bearer`), scoped. "
            "Dashboard plane: console session JWT (`Authorization: Bearer`), by role. Every "
            'non-2xx body is `{"detail": ...}` (some carry more members, named per answer).'
            + _JSON_BODY_RULES
        ),
    },
    "teampath": {
        "title": "Countersign: team-path profile",
        "description": (
            "Policy per team, receipts to an outbox (with a batch route), approvals keyed by "
            "id. Every request carries `Authorization: Bearer <API key>`. Every non-2xx body "
            'is `{"error": <code>, "message": ...}`; the `error` codes are the enum of '
            "`TeamPathError` (docs/teampath-errors.md)." + _JSON_BODY_RULES
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


def _referenced_components(paths: Schema, inferred: Schema) -> dict[str, Schema]:
    """The components of ``COMPONENTS`` the operations or the inferred components use."""
    found: dict[str, Schema] = {}
    pending = [*_references(paths), *_references(inferred)]
    while pending:
        name = pending.pop()
        if name in found or name not in COMPONENTS:
            continue
        found[name] = deepcopy(COMPONENTS[name])
        pending.extend(_references(found[name]))
    return dict(sorted(found.items()))


# What every route answers before its view runs (apps.common.request_guard): listed on each
# operation that does not say more about the same status.
_ANY_REQUEST: dict[str, dict[int, OpenApiResponse]] = {
    "keyscoped": {
        400: keyscoped_error("A `Host` not allowed, or more query parameters than are parsed."),
        413: keyscoped_error("A declared `Content-Length` above `JSON_BODY_MAX_BYTES`."),
        422: keyscoped_error("U+0000 in the path, the query string or a header."),
    },
    "teampath": {
        400: teampath_error(["bad_request", "validation_failed"], "A `Host` not allowed, more "
                            "query parameters than are parsed, or U+0000 in the path, the "
                            "query string or a header"),
        413: teampath_error(["payload_too_large"], "A declared `Content-Length` above the limit"),
    },
}  # fmt: skip


def _list_any_request_answers(paths: Schema, profile: str) -> None:
    """Every operation but ``/metrics`` lists ``_ANY_REQUEST``'s answers it does not state."""
    for path, operations in paths.items():
        for operation in operations.values() if path != "/metrics" else ():
            answers = operation.setdefault("responses", {})
            for status, answer in _ANY_REQUEST[profile].items():
                answers.setdefault(
                    str(status),
                    {
                        "description": answer.description,
                        "content": {"application/json": {"schema": deepcopy(answer.response)}},
                    },
                )
            operation["responses"] = dict(sorted(answers.items()))


def _finish_operations(paths: Schema, components: Schema) -> None:
    """A request body is required when one of its members is (a route whose members are all
    optional takes no body too); error answers name their headers."""
    for operations in paths.values():
        for operation in operations.values():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                target = media.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
                if components.get(target, {}).get("required"):
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
    _list_any_request_answers(paths, profile)
    components = result.setdefault("components", {})
    inferred = components.get("schemas", {})
    components["schemas"] = {
        **inferred,
        **_referenced_components(paths, inferred),
        # Webhook bodies are sent, not served: every profile documents them.
        **event_components(),
    }
    _finish_operations(paths, components["schemas"])
    result["paths"] = dict(sorted(paths.items()))
    return result


def profile_document(profile: str) -> Schema:
    """The OpenAPI document of ``profile``, as ``GET /v1/schema`` serves it there."""
    generator = SchemaGenerator(urlconf=f"config.urls.{profile}")  # type: ignore[no-untyped-call]
    document: Schema = generator.get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return document
