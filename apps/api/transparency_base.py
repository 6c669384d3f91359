"""The transparency log's routes (transparency.md §5, §6): the base both profiles' log
modules build on (``apps.api.keyscoped.transparency``, ``apps.api.teampath.transparency``).

Each route's work is written once here (``CheckpointRoute`` and its siblings), with its
bodies, throttles and the OpenAPI description the profiles share (``log_schema``); each
profile's module declares its views over them with its own error contract and error
answers. Public routes take no credential (any sent is ignored) and share one rate per
client address; the proof routes are on the SDK plane (and, key-scoped, the dashboard
plane too).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.fields import empty
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.authentication import (
    ApiKeyAuthentication,
    ConsoleJwtAuthentication,
    presented_bearer,
)
from apps.api.base import ExceptionHandler, RateLimitedApi
from apps.api.keyscoped.base import keyscoped_exception_handler
from apps.api.openapi import (
    keyscoped_errors,
    ok,
    teampath_error,
)
from apps.api.serializers import HashField
from apps.api.teampath.base import teampath_exception_handler
from apps.api.throttles import _LimitThrottle
from apps.common.errors import InvalidInput
from apps.tenancy.credential_limits import client_address
from apps.transparency.errors import TileNotFound
from apps.transparency.selectors import (
    latest_note,
    org_consistency,
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


# A log route answers in its profile's error contract (a pending proof's Retry-After comes
# with the error); each profile's module sets ``profile``. (No docstring: drf-spectacular
# would take it as every log route's description.)
class _ProfileApi(RateLimitedApi):
    profile = "keyscoped"

    def get_exception_handler(self) -> ExceptionHandler:
        if self.profile == "teampath":
            return teampath_exception_handler
        return keyscoped_exception_handler


class KeyScopedLogApi(_ProfileApi):
    profile = "keyscoped"


class TeamPathLogApi(_ProfileApi):
    profile = "teampath"


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


# -- bodies (the same in both profiles) ----------------------------------------------------


class _U64Field(serializers.IntegerField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        super().__init__(**kwargs)


class _HashesField(serializers.ListField):
    """Hashes along a Merkle path, hex, at most 64."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=HashField(), max_length=64, **kwargs)


class ProofCosignatureSerializer(serializers.Serializer[Any]):
    witness_key = serializers.CharField()
    signature = serializers.CharField()

    class Meta:
        ref_name = "LogProofCosignature"


class ProofSerializer(serializers.Serializer[Any]):
    """The proof object (§5.1): the receipt's inclusion in its org's log, that log's head in
    the top log, the checkpoint, and (once published) its cosignatures."""

    log_id = serializers.CharField()
    leaf_index = _U64Field()
    inclusion_proof = _HashesField()
    org_root = HashField()
    org_tree_size = serializers.IntegerField(min_value=1)
    epoch = serializers.IntegerField(min_value=1)
    org_id = serializers.RegexField(r"^olog_[a-z2-7]{26}$")
    top_leaf_index = _U64Field()
    top_inclusion_proof = _HashesField(min_length=1, required=False)
    checkpoint = serializers.CharField()
    cosignatures = serializers.ListField(
        child=ProofCosignatureSerializer(), min_length=1, required=False
    )

    class Meta:
        ref_name = "LogProof"


class TopConsistencySerializer(serializers.Serializer[Any]):
    first = _U64Field()
    second = _U64Field()
    proof = _HashesField()

    class Meta:
        ref_name = "LogConsistency"


class OrgConsistencySerializer(serializers.Serializer[Any]):
    org_id = serializers.CharField()
    first = _U64Field()
    second = _U64Field()
    first_root = HashField()
    second_root = HashField()
    proof = _HashesField()

    class Meta:
        ref_name = "LogOrgConsistency"


class LeafSerializer(serializers.Serializer[Any]):
    index = _U64Field()
    epoch = _U64Field()
    org_id = serializers.CharField()
    org_tree_size = _U64Field()
    org_root = HashField()

    class Meta:
        ref_name = "LogLeaf"


class LeavesSerializer(serializers.Serializer[Any]):
    start = _U64Field()
    end = _U64Field()
    leaves = LeafSerializer(many=True)

    class Meta:
        ref_name = "LogLeaves"


class WitnessSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    key_id = serializers.CharField()
    vkey = serializers.CharField()
    active = serializers.BooleanField()

    class Meta:
        ref_name = "LogWitness"


class WitnessesSerializer(serializers.Serializer[Any]):
    witnesses = WitnessSerializer(many=True)

    class Meta:
        ref_name = "LogWitnesses"


class CosignatureInputSerializer(serializers.Serializer[Any]):
    """A witness's cosignature of a checkpoint. The members are judged by
    ``cosignature_submit`` in §5.6's order and words, not here: this only reads them."""

    checkpoint_size = serializers.IntegerField(min_value=1, max_value=MAX_U64)
    cosignature = serializers.CharField(help_text="A cosignature/v1 line (§4.4).")

    class Meta:
        ref_name = "LogCosignatureRequest"

    def run_validation(self, data: Any = empty) -> dict[str, Any]:
        return self.to_internal_value(data)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise InvalidInput("the body must be a JSON object {checkpoint_size, cosignature}")
        return {name: data.get(name) for name in ("checkpoint_size", "cosignature")}


class CosignatureOutputSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(["accepted", "duplicate"])
    checkpoint_size = _U64Field()
    witness = serializers.CharField()
    key_id = serializers.CharField()
    timestamp = _U64Field()

    class Meta:
        ref_name = "LogCosignatureAnswer"


_TEXT = OpenApiResponse(response=OpenApiTypes.STR, description="The checkpoint note (§4.2).")
_BINARY = OpenApiResponse(response=OpenApiTypes.BINARY, description="Tile bytes (§6).")


def _query(name: str, description: str, minimum: int = 1) -> OpenApiParameter:
    """A required size or index: a decimal integer, at least ``minimum``, at most 2^64 - 1
    (``_size``). Whether it is in range of the log as it stands is judged by the route
    (422 key-scoped / 400 team-path, §5.4, §5.5)."""
    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": minimum, "maximum": MAX_U64},
        OpenApiParameter.QUERY,
        required=True,
        description=description,
    )


def teampath_public_errors(**codes: list[str]) -> dict[int, OpenApiResponse]:
    """Error answers of a public team-path route: ``s<status>=[codes]``, with the public
    rate's 429 and the capacity 503."""
    answers = {
        429: teampath_error(["rate_limited"], "Over the public rate; see `Retry-After`"),
        503: teampath_error(["over_capacity"], "Briefly at capacity; see `Retry-After`"),
    }
    for key, names in codes.items():
        answers[int(key[1:])] = teampath_error(names)
    return dict(sorted(answers.items()))


def keyscoped_public_errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """Error answers of a public key-scoped route (no credential to refuse)."""
    return keyscoped_errors(*statuses, credential=False)


# What each log route's description shares across the profiles: its operation, summary,
# parameters, request and success answers. The profiles add their error answers.
LOG_ROUTES: dict[str, dict[str, Any]] = {
    "checkpoint": {
        "operation": "log_checkpoint",
        "summary": "The latest checkpoint with every accepted cosignature",
        "responses": {(200, "text/plain"): _TEXT},
    },
    "consistency": {
        "operation": "log_consistency",
        "summary": "A consistency proof between two sizes of the top log",
        "parameters": [_query("first", "The smaller size"), _query("second", "The larger")],
        "responses": {200: ok(TopConsistencySerializer, "The proof")},
    },
    "org_consistency": {
        "operation": "log_org_consistency",
        "summary": "A consistency proof between two published heads of an org",
        "parameters": [
            _query("first", "A published head's size"),
            _query("second", "A larger published head's size"),
        ],
        "responses": {200: ok(OrgConsistencySerializer, "The proof and both roots")},
    },
    "leaves": {
        "operation": "log_leaves",
        "summary": "Top-log leaves (org heads), at most 1000",
        "parameters": [
            _query("start", "First index", minimum=0),
            _query("end", "Index past the last"),
        ],
        "responses": {200: ok(LeavesSerializer, "The leaves; `end` says where they stop")},
    },
    "witnesses": {
        "operation": "log_witnesses",
        "summary": "Every registered witness key (discovery, never a trust root)",
        "responses": {200: ok(WitnessesSerializer, "By name, key ID")},
    },
    "cosignatures": {
        "operation": "log_cosignature_submit",
        "summary": "Submit a registered witness's cosignature/v1 line",
        "method": "post",
        "request": CosignatureInputSerializer,
        "responses": {
            201: ok(CosignatureOutputSerializer, "Accepted"),
            200: ok(CosignatureOutputSerializer, "A duplicate"),
        },
    },
    "tile": {
        "operation": "log_tile",
        "summary": "A tlog-tiles hash tile or entry bundle of the top log",
        "parameters": [
            OpenApiParameter(
                "tile",
                str,
                OpenApiParameter.PATH,
                description="`<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`",
            )
        ],
        "responses": {(200, "application/octet-stream"): _BINARY},
    },
}


def log_schema(profile: str, route: str, errors: dict[int, OpenApiResponse]) -> Any:
    """The OpenAPI description of a public log route on ``profile``: what the profiles
    share (``LOG_ROUTES``), then the profile's ``errors``. Team-path operation ids carry
    the profile's name (both documents are served by one deployment's tooling)."""
    spec = LOG_ROUTES[route]
    operation = spec["operation"]
    extra = {name: spec[name] for name in ("parameters", "request") if name in spec}
    return extend_schema_view(
        **{
            spec.get("method", "get"): extend_schema(
                operation_id=f"{operation}_{profile}" if profile == "teampath" else operation,
                summary=spec["summary"],
                tags=["transparency"],
                auth=[],
                **extra,
                responses={**spec["responses"], **errors},
            )
        }
    )


# -- the routes' work, once for both profiles ------------------------------------------------


class CheckpointRoute(PublicLogApi):
    def get(self, request: Request) -> HttpResponse:
        response = HttpResponse(latest_note(), content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "public, max-age=5"
        return response


class ConsistencyRoute(PublicLogApi):
    def get(self, request: Request) -> Response:
        first = _size(request.query_params, "first")
        second = _size(request.query_params, "second")
        proof = top_consistency(first=first, second=second)
        body = {"first": first, "second": second, "proof": [value.hex() for value in proof]}
        return Response(TopConsistencySerializer(body).data)


class OrgConsistencyRoute(PublicLogApi):
    def get(self, request: Request, org_id: str) -> Response:
        first = _size(request.query_params, "first")
        second = _size(request.query_params, "second")
        found = org_consistency(org_id=org_id, first=first, second=second)
        body = {
            "org_id": found.org_id,
            "first": found.first,
            "second": found.second,
            "first_root": found.first_root.hex(),
            "second_root": found.second_root.hex(),
            "proof": [value.hex() for value in found.proof],
        }
        return Response(OrgConsistencySerializer(body).data)


class LeavesRoute(PublicLogApi):
    def get(self, request: Request) -> Response:
        start = _size(request.query_params, "start")
        end = _size(request.query_params, "end")
        stop, leaves = top_leaves(start=start, end=end)
        return Response(LeavesSerializer({"start": start, "end": stop, "leaves": leaves}).data)


class WitnessesRoute(PublicLogApi):
    def get(self, request: Request) -> Response:
        return Response(WitnessesSerializer({"witnesses": witness_list()}).data)


class CosignatureSubmitRoute(PublicLogApi):
    throttle_classes = [CosignRateThrottle]

    def post(self, request: Request) -> Response:
        data = CosignatureInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = cosignature_submit(**data.validated_data)
        return Response(
            CosignatureOutputSerializer(result.as_dict()).data,
            status=201 if result.created else 200,
        )


class TileRoute(PublicLogApi):
    def get(self, request: Request, tile: str) -> HttpResponse:
        ref = parse_tile_path(tile)
        if ref is None:
            raise TileNotFound("not a tile path")
        response = HttpResponse(tile_bytes(ref), content_type="application/octet-stream")
        response["Cache-Control"] = TILE_CACHE
        return response


PROOF_PENDING = "Not yet in a checkpoint: retry after `Retry-After` seconds"
