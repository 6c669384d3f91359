"""Key-scoped routes of the transparency log (transparency.md §5, §6): the public log
routes over their shared work (``apps.api.transparency_base``), in this profile's error contract
(a body or query refusal is 422), and the receipt's proof on the SDK and dashboard planes."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.authentication import (
    ApiKeyAuthentication,
    ApiKeyPrincipal,
    ConsoleJwtAuthentication,
    ConsolePrincipal,
)
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok
from apps.api.permissions import role_required, scope_required
from apps.api.throttles import DashboardRateThrottle, OrgRateThrottle
from apps.api.transparency_base import (
    PROOF_PENDING,
    CheckpointRoute,
    ConsistencyRoute,
    CosignatureSubmitRoute,
    KeyScopedLogApi,
    LeavesRoute,
    OrgConsistencyRoute,
    ProofSerializer,
    SdkOrSessionAuthentication,
    TileRoute,
    WitnessesRoute,
    keyscoped_public_errors,
    log_schema,
)
from apps.tenancy.models import Role, Scope
from apps.transparency.selectors import receipt_proof

PROFILE = "keyscoped"


@log_schema(PROFILE, "checkpoint", keyscoped_public_errors(404))
class CheckpointApi(CheckpointRoute):
    profile = PROFILE


@log_schema(PROFILE, "consistency", keyscoped_public_errors(422))
class ConsistencyApi(ConsistencyRoute):
    profile = PROFILE


@log_schema(PROFILE, "org_consistency", keyscoped_public_errors(404, 422))
class OrgConsistencyApi(OrgConsistencyRoute):
    profile = PROFILE


@log_schema(PROFILE, "leaves", keyscoped_public_errors(422))
class LeavesApi(LeavesRoute):
    profile = PROFILE


@log_schema(PROFILE, "witnesses", keyscoped_public_errors())
class WitnessesApi(WitnessesRoute):
    profile = PROFILE


@log_schema(PROFILE, "cosignatures", keyscoped_public_errors(403, 404, 422, 413))
class CosignatureSubmitApi(CosignatureSubmitRoute):
    profile = PROFILE


@log_schema(PROFILE, "tile", keyscoped_public_errors(404))
class TileApi(TileRoute):
    profile = PROFILE


@extend_schema_view(
    get=extend_schema(
        operation_id="receipt_proof",
        summary="A mirrored receipt's transparency proof object (SDK: receipts:write; auditor+)",
        tags=["transparency"],
        responses={
            200: ok(ProofSerializer, "The proof object (§5.1)"),
            **keyscoped_errors(
                403,
                s404=keyscoped_error("No such receipt for the caller"),
                s409=keyscoped_error(PROOF_PENDING),
            ),
        },
    )
)
class ReceiptProofApi(KeyScopedLogApi):
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
        return Response(
            ProofSerializer(receipt_proof(org=principal.org, action_hash=action_hash)).data
        )
