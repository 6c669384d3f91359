"""Team-path routes of the transparency log (transparency.md §5, §6): the public log
routes over their shared work (``apps.api.transparency_base``), in this profile's error contract
and codes (a body or query refusal is 400, a refused cosignature 422), and the receipt's
proof with the team's key."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.authentication import ApiKeyPrincipal
from apps.api.openapi import ok, teampath_error, teampath_errors
from apps.api.permissions import scope_required
from apps.api.teampath.base import BearerApiKeyAuthentication
from apps.api.throttles import OrgRateThrottle
from apps.api.transparency_base import (
    PROOF_PENDING,
    CheckpointRoute,
    ConsistencyRoute,
    CosignatureSubmitRoute,
    LeavesRoute,
    OrgConsistencyRoute,
    ProofSerializer,
    TeamPathLogApi,
    TileRoute,
    WitnessesRoute,
    log_schema,
    teampath_public_errors,
)
from apps.tenancy.models import Scope
from apps.transparency.selectors import receipt_proof

PROFILE = "teampath"


@log_schema(PROFILE, "checkpoint", teampath_public_errors(s404=["checkpoint_not_found"]))
class CheckpointApi(CheckpointRoute):
    profile = PROFILE


@log_schema(PROFILE, "consistency", teampath_public_errors(s400=["validation_failed"]))
class ConsistencyApi(ConsistencyRoute):
    profile = PROFILE


@log_schema(
    PROFILE,
    "org_consistency",
    teampath_public_errors(s404=["org_head_not_found"], s400=["validation_failed"]),
)
class OrgConsistencyApi(OrgConsistencyRoute):
    profile = PROFILE


@log_schema(PROFILE, "leaves", teampath_public_errors(s400=["validation_failed"]))
class LeavesApi(LeavesRoute):
    profile = PROFILE


@log_schema(PROFILE, "witnesses", teampath_public_errors())
class WitnessesApi(WitnessesRoute):
    profile = PROFILE


@log_schema(
    PROFILE,
    "cosignatures",
    teampath_public_errors(
        s403=["witness_unknown"],
        s404=["checkpoint_not_found"],
        s400=["invalid_json", "validation_failed"],
        s422=["cosignature_invalid"],
        s413=["payload_too_large"],
    ),
)
class CosignatureSubmitApi(CosignatureSubmitRoute):
    profile = PROFILE


@log_schema(PROFILE, "tile", teampath_public_errors(s404=["tile_not_found"]))
class TileApi(TileRoute):
    profile = PROFILE


@extend_schema_view(
    get=extend_schema(
        operation_id="receipt_proof_teampath",
        summary="A mirrored receipt's transparency proof object (the team's key, receipts:write)",
        tags=["transparency"],
        responses={
            200: ok(ProofSerializer, "The proof object (§5.1)"),
            **teampath_errors(
                s404=teampath_error(["receipt_not_found"], "No such receipt for the key's team"),
                s409=teampath_error(["proof_pending"], PROOF_PENDING),
            ),
        },
    )
)
class TeamReceiptProofApi(TeamPathLogApi):
    """GET /v1/receipts/{receiptId}/proof, team-path."""

    authentication_classes = [BearerApiKeyAuthentication]
    permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]
    throttle_classes = [OrgRateThrottle]

    def get(self, request: Request, receipt_id: str) -> Response:
        principal: object = request.user
        assert isinstance(principal, ApiKeyPrincipal)
        return Response(
            ProofSerializer(receipt_proof(org=principal.org, action_hash=receipt_id)).data
        )
