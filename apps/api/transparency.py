"""The transparency log's routes (transparency.md §5, §6), for both API profiles.

Each view is written once; ``profile`` (set per URL conf) picks the error body. Public
routes take no credential (any sent is ignored) and share one rate per client address;
the proof routes are on the SDK plane (and, key-scoped, the dashboard plane too).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.base import ExceptionHandler, RateLimitedApi
from apps.api.keyscoped.base import keyscoped_exception_handler
from apps.api.teampath.base import BearerApiKeyAuthentication, teampath_exception_handler
from apps.common.errors import InvalidInput
from apps.common.openapi import (
    keyscoped_error,
    keyscoped_errors,
    teampath_error,
    teampath_errors,
)
from apps.tenancy.authentication import (
    ApiKeyAuthentication,
    ApiKeyPrincipal,
    ConsoleJwtAuthentication,
    ConsolePrincipal,
    presented_bearer,
)
from apps.tenancy.credential_limits import client_address
from apps.tenancy.limits import DashboardRateThrottle, OrgRateThrottle, _LimitThrottle
from apps.tenancy.models import Role, Scope
from apps.tenancy.permissions import role_required, scope_required
from apps.transparency.errors import TileNotFound
from apps.transparency.selectors import (
    latest_note,
    org_consistency,
    receipt_proof,
    tile_bytes,
    top_consistency,
    top_leaves,
    witness_list,
)
from apps.transparency.services import cosignature_submit
from apps.transparency.tree.tiles import parse_tile_path

_DECIMAL = re.compile(r"^[0-9]{1,20}\Z")
MAX_U64 = 2**64 - 1
TILE_CACHE = "public, max-age=31536000, immutable"
HEX64 = "^[0-9a-f]{64}$"


# -- throttles and authentication --------------------------------------------------------


class PublicLogThrottle(_LimitThrottle):
    """All public ``/v1/log/*`` GET routes together, per client address."""

    plane = "log"

    def bucket(self, request: Request) -> tuple[str, int, int] | None:
        rate = settings.TRANSPARENCY_PUBLIC_RATE_PER_MINUTE
        return f"log:{client_address(request)}", rate, rate


class CosignRateThrottle(_LimitThrottle):
    plane = "log"

    def bucket(self, request: Request) -> tuple[str, int, int] | None:
        rate = settings.TRANSPARENCY_COSIGN_RATE_PER_MINUTE
        return f"cosign:{client_address(request)}", rate, rate


class SdkOrSessionAuthentication(BaseAuthentication):
    """An API key (``x-api-key`` or a Bearer that is not a JWT) or a console session JWT:
    each credential goes to its own plane's check only."""

    def authenticate(self, request: Request) -> Any:
        if request.META.get("HTTP_X_API_KEY", "").strip():
            return ApiKeyAuthentication().authenticate(request)
        bearer = presented_bearer(request)
        if bearer is None:
            return None
        if bearer.count(".") == 2:  # a JWT; API keys are hk_… URL-safe text, no dots
            return ConsoleJwtAuthentication().authenticate(request)
        return ApiKeyAuthentication().authenticate(request)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="sdk"'


# -- bases -------------------------------------------------------------------------------


class _ProfileApi(RateLimitedApi):
    profile = "keyscoped"

    def get_exception_handler(self) -> ExceptionHandler:
        # Each profile's contract; a pending proof's Retry-After comes with the error.
        if self.profile == "teampath":
            return teampath_exception_handler
        return keyscoped_exception_handler


class PublicLogApi(_ProfileApi):
    authentication_classes: list[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]
    throttle_classes = [PublicLogThrottle]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The log is served whatever the request's Accept header says (§5).
        return super().perform_content_negotiation(request, force=True)


def _size(params: Any, name: str) -> int:
    value = params.get(name)
    if value is None or not _DECIMAL.match(value) or int(value) > MAX_U64:
        raise InvalidInput(f"{name} must be a decimal integer")
    return int(value)


# -- OpenAPI helpers ---------------------------------------------------------------------

_HASH = {"type": "string", "pattern": HEX64}
_HASHES = {"type": "array", "items": _HASH, "maxItems": 64}
_U64 = {"type": "integer", "minimum": 0}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required if required is not None else list(properties),
    }


PROOF_OBJECT = _object(
    {
        "log_id": {"type": "string"},
        "leaf_index": _U64,
        "inclusion_proof": _HASHES,
        "org_root": _HASH,
        "org_tree_size": {"type": "integer", "minimum": 1},
        "epoch": {"type": "integer", "minimum": 1},
        "org_id": {"type": "string", "pattern": "^olog_[a-z2-7]{26}$"},
        "top_leaf_index": _U64,
        "top_inclusion_proof": {**_HASHES, "minItems": 1},
        "checkpoint": {"type": "string"},
        "cosignatures": {
            "type": "array",
            "minItems": 1,
            "items": _object({"witness_key": {"type": "string"}, "signature": {"type": "string"}}),
        },
    },
    required=[
        "log_id", "leaf_index", "inclusion_proof", "org_root", "org_tree_size", "epoch",
        "org_id", "top_leaf_index", "checkpoint",
    ],
)  # fmt: skip
TOP_CONSISTENCY = _object({"first": _U64, "second": _U64, "proof": _HASHES})
ORG_CONSISTENCY = _object(
    {
        "org_id": {"type": "string"},
        "first": _U64,
        "second": _U64,
        "first_root": _HASH,
        "second_root": _HASH,
        "proof": _HASHES,
    }
)
LEAVES = _object(
    {
        "start": _U64,
        "end": _U64,
        "leaves": {
            "type": "array",
            "items": _object(
                {
                    "index": _U64,
                    "epoch": _U64,
                    "org_id": {"type": "string"},
                    "org_tree_size": _U64,
                    "org_root": _HASH,
                }
            ),
        },
    }
)
WITNESSES = _object(
    {
        "witnesses": {
            "type": "array",
            "items": _object(
                {
                    "name": {"type": "string"},
                    "key_id": {"type": "string"},
                    "vkey": {"type": "string"},
                    "active": {"type": "boolean"},
                }
            ),
        }
    }
)
COSIGNATURE_ANSWER = _object(
    {
        "status": {"type": "string", "enum": ["accepted", "duplicate"]},
        "checkpoint_size": _U64,
        "witness": {"type": "string"},
        "key_id": {"type": "string"},
        "timestamp": _U64,
    }
)
COSIGNATURE_BODY = {
    "type": "object",
    "properties": {
        "checkpoint_size": {"type": "integer", "minimum": 1},
        "cosignature": {"type": "string", "description": "A cosignature/v1 line (§4.4)."},
    },
    "required": ["checkpoint_size", "cosignature"],
}
_TEXT = OpenApiResponse(response=OpenApiTypes.STR, description="The checkpoint note (§4.2).")
_BINARY = OpenApiResponse(response=OpenApiTypes.BINARY, description="Tile bytes (§6).")


def _query(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": 0},
        OpenApiParameter.QUERY,
        required=True,
        description=description,
    )


def _public_errors(profile: str, **codes: list[str]) -> dict[int, OpenApiResponse]:
    """Error answers of a public route: ``s<status>=[team-path codes]``."""
    if profile == "teampath":
        answers = {
            429: teampath_error(["rate_limited"], "Over the public rate; see `Retry-After`"),
            503: teampath_error(["over_capacity"], "Briefly at capacity; see `Retry-After`"),
        }
        for key, names in codes.items():
            answers[int(key[1:])] = teampath_error(names)
        return dict(sorted(answers.items()))
    return keyscoped_errors(*(int(key[1:]) for key in codes), credential=False)


def _schema(profile: str, operation: str, summary: str, method: str = "get", **kwargs: Any) -> Any:
    return extend_schema_view(
        **{
            method: extend_schema(
                operation_id=f"{operation}_{profile}" if profile == "teampath" else operation,
                summary=summary,
                tags=["transparency"],
                **kwargs,
            )
        }
    )


# -- views -------------------------------------------------------------------------------


def _views(profile: str) -> dict[str, type[Any]]:
    """The profile's view classes (one set per profile: the OpenAPI shapes differ)."""
    keyscoped = profile == "keyscoped"

    @_schema(
        profile,
        "log_checkpoint",
        "The latest checkpoint with every accepted cosignature",
        auth=[],
        responses={
            (200, "text/plain"): _TEXT,
            **_public_errors(profile, s404=["checkpoint_not_found"]),
        },
    )
    class CheckpointApi(PublicLogApi):
        def get(self, request: Request) -> HttpResponse:
            response = HttpResponse(latest_note(), content_type="text/plain; charset=utf-8")
            response["Cache-Control"] = "public, max-age=5"
            return response

    @_schema(
        profile,
        "log_consistency",
        "A consistency proof between two sizes of the top log",
        auth=[],
        parameters=[_query("first", "The smaller size"), _query("second", "The larger")],
        responses={
            200: OpenApiResponse(TOP_CONSISTENCY, description="The proof"),
            **_public_errors(profile, **{"s422" if keyscoped else "s400": ["validation_failed"]}),
        },
    )
    class ConsistencyApi(PublicLogApi):
        def get(self, request: Request) -> Response:
            first = _size(request.query_params, "first")
            second = _size(request.query_params, "second")
            proof = top_consistency(first=first, second=second)
            return Response(
                {"first": first, "second": second, "proof": [value.hex() for value in proof]}
            )

    @_schema(
        profile,
        "log_org_consistency",
        "A consistency proof between two published heads of an org",
        auth=[],
        parameters=[
            _query("first", "A published head's size"),
            _query("second", "A larger published head's size"),
        ],
        responses={
            200: OpenApiResponse(ORG_CONSISTENCY, description="The proof and both roots"),
            **_public_errors(
                profile,
                s404=["org_head_not_found"],
                **{"s422" if keyscoped else "s400": ["validation_failed"]},
            ),
        },
    )
    class OrgConsistencyApi(PublicLogApi):
        def get(self, request: Request, org_id: str) -> Response:
            first = _size(request.query_params, "first")
            second = _size(request.query_params, "second")
            found = org_consistency(org_id=org_id, first=first, second=second)
            return Response(
                {
                    "org_id": found.org_id,
                    "first": found.first,
                    "second": found.second,
                    "first_root": found.first_root.hex(),
                    "second_root": found.second_root.hex(),
                    "proof": [value.hex() for value in found.proof],
                }
            )

    @_schema(
        profile,
        "log_leaves",
        "Top-log leaves (org heads), at most 1000",
        auth=[],
        parameters=[_query("start", "First index"), _query("end", "Index past the last")],
        responses={
            200: OpenApiResponse(LEAVES, description="The leaves; `end` says where they stop"),
            **_public_errors(profile, **{"s422" if keyscoped else "s400": ["validation_failed"]}),
        },
    )
    class LeavesApi(PublicLogApi):
        def get(self, request: Request) -> Response:
            start = _size(request.query_params, "start")
            end = _size(request.query_params, "end")
            stop, leaves = top_leaves(start=start, end=end)
            return Response({"start": start, "end": stop, "leaves": leaves})

    @_schema(
        profile,
        "log_witnesses",
        "Every registered witness key (discovery, never a trust root)",
        auth=[],
        responses={
            200: OpenApiResponse(WITNESSES, description="By name, key ID"),
            **_public_errors(profile),
        },
    )
    class WitnessesApi(PublicLogApi):
        def get(self, request: Request) -> Response:
            return Response(
                {
                    "witnesses": [
                        {"name": w.name, "key_id": w.key_id, "vkey": w.vkey, "active": w.active}
                        for w in witness_list()
                    ]
                }
            )

    bad_body = "s422" if keyscoped else "s400"
    cosign_errors = _public_errors(
        profile,
        s403=["witness_unknown"],
        s404=["checkpoint_not_found"],
        **({bad_body: ["invalid_json", "validation_failed"]}),
        **({} if keyscoped else {"s422": ["cosignature_invalid"]}),
        s413=["payload_too_large"],
    )

    @_schema(
        profile,
        "log_cosignature_submit",
        "Submit a registered witness's cosignature/v1 line",
        method="post",
        auth=[],
        request={"application/json": COSIGNATURE_BODY},
        responses={
            201: OpenApiResponse(COSIGNATURE_ANSWER, description="Accepted"),
            200: OpenApiResponse(COSIGNATURE_ANSWER, description="A duplicate"),
            **cosign_errors,
        },
    )
    class CosignatureSubmitApi(PublicLogApi):
        throttle_classes = [CosignRateThrottle]

        def post(self, request: Request) -> Response:
            data = request.data
            if not isinstance(data, dict):
                raise InvalidInput("the body must be a JSON object {checkpoint_size, cosignature}")
            result = cosignature_submit(
                checkpoint_size=data.get("checkpoint_size"), cosignature=data.get("cosignature")
            )
            return Response(result.as_dict(), status=201 if result.created else 200)

    @_schema(
        profile,
        "log_tile",
        "A tlog-tiles hash tile or entry bundle of the top log",
        auth=[],
        parameters=[
            OpenApiParameter(
                "tile",
                str,
                OpenApiParameter.PATH,
                description="`<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`",
            )
        ],
        responses={
            (200, "application/octet-stream"): _BINARY,
            **_public_errors(profile, s404=["tile_not_found"]),
        },
    )
    class TileApi(PublicLogApi):
        def get(self, request: Request, tile: str) -> HttpResponse:
            ref = parse_tile_path(tile)
            if ref is None:
                raise TileNotFound("not a tile path")
            response = HttpResponse(tile_bytes(ref), content_type="application/octet-stream")
            response["Cache-Control"] = TILE_CACHE
            return response

    views: dict[str, type[Any]] = {
        "checkpoint": CheckpointApi,
        "consistency": ConsistencyApi,
        "org_consistency": OrgConsistencyApi,
        "leaves": LeavesApi,
        "witnesses": WitnessesApi,
        "cosignatures": CosignatureSubmitApi,
        "tile": TileApi,
    }
    for view in views.values():
        view.profile = profile
    return views


KEYSCOPED = _views("keyscoped")
TEAMPATH = _views("teampath")

_PENDING = "Not yet in a checkpoint: retry after `Retry-After` seconds"


@extend_schema_view(
    get=extend_schema(
        operation_id="receipt_proof",
        summary="A mirrored receipt's transparency proof object (SDK: receipts:write; auditor+)",
        tags=["transparency"],
        responses={
            200: OpenApiResponse(PROOF_OBJECT, description="The proof object (§5.1)"),
            **keyscoped_errors(
                403,
                s404=keyscoped_error("No such receipt for the caller"),
                s409=keyscoped_error(_PENDING),
            ),
        },
    )
)
class ReceiptProofApi(_ProfileApi):
    """GET /v1/receipts/{action_hash}/proof, key-scoped: SDK plane or dashboard plane."""

    # Both planes, as the OpenAPI document says; a request's credential goes to its own
    # plane's check only (SdkOrSessionAuthentication).
    authentication_classes = [ApiKeyAuthentication, ConsoleJwtAuthentication]
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE) | role_required(Role.AUDITOR)]
    throttle_classes = [OrgRateThrottle, DashboardRateThrottle]

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        initialized = super().initialize_request(request, *args, **kwargs)
        initialized.authenticators = (SdkOrSessionAuthentication(),)
        return initialized

    def get(self, request: Request, action_hash: str) -> Response:
        principal: object = request.user
        assert isinstance(principal, ApiKeyPrincipal | ConsolePrincipal)
        return Response(receipt_proof(org=principal.org, action_hash=action_hash))


@extend_schema_view(
    get=extend_schema(
        operation_id="receipt_proof_teampath",
        summary="A mirrored receipt's transparency proof object (the team's key, receipts:write)",
        tags=["transparency"],
        responses={
            200: OpenApiResponse(PROOF_OBJECT, description="The proof object (§5.1)"),
            **teampath_errors(
                s404=teampath_error(["receipt_not_found"], "No such receipt for the key's team"),
                s409=teampath_error(["proof_pending"], _PENDING),
            ),
        },
    )
)
class TeamReceiptProofApi(_ProfileApi):
    """GET /v1/receipts/{receiptId}/proof, team-path."""

    profile = "teampath"
    authentication_classes = [BearerApiKeyAuthentication]
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]
    throttle_classes = [OrgRateThrottle]

    def get(self, request: Request, receipt_id: str) -> Response:
        principal: object = request.user
        assert isinstance(principal, ApiKeyPrincipal)
        return Response(receipt_proof(org=principal.org, action_hash=receipt_id))
