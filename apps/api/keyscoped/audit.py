"""The auditor's routes: the mirror chain (GET /v1/audit/chain) and the evidence export."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi
from apps.api.openapi import keyscoped_errors, ok
from apps.api.permissions import console_principal, role_required
from apps.api.serializers import EvidenceWindowInput
from apps.audit.evidence import evidence_export, evidence_response, parse_window
from apps.audit.selectors import audit_chain_window
from apps.common.vocabulary import TRUST_LEVELS
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class ArchiveSerializer(serializers.Serializer[Any]):
    month = serializers.CharField(help_text="YYYY-MM (UTC): the org-month archived.")
    name = serializers.CharField(help_text="The evidence tar's name in the archive storage.")
    location = serializers.CharField(help_text="Where it is: a path, or the bucket's URL.")
    version = serializers.CharField(
        help_text="The object version written and verified, which every read takes (a "
        "versioned bucket); empty otherwise."
    )
    sha256 = serializers.CharField(help_text="SHA-256 of the whole tar.")
    first_seq = serializers.IntegerField()
    last_seq = serializers.IntegerField()
    locked_until = serializers.DateTimeField(
        allow_null=True,
        help_text="Until when the bucket's object lock holds that version (UTC), as read "
        "when it was verified; null without a lock.",
    )


# Inline, with ``nullable`` beside ``type``: OpenAPI 3.0 validators ignore ``nullable``
# next to the ``allOf`` wrapper a nullable component reference would get.
@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {
            name: {"type": "integer" if name.endswith("_seq") else "string",
                   "description": field.help_text or "",
                   **({"format": "date-time", "nullable": True} if field.allow_null else {})}
            for name, field in ArchiveSerializer().fields.items()
        },
        "required": list(ArchiveSerializer().fields),
    }
)  # fmt: skip
class ArchiveRefField(serializers.Field):  # type: ignore[type-arg]
    """Where a retired entry's body is archived (null while the body is in the mirror)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Any) -> dict[str, Any]:
        return dict(ArchiveSerializer(value).data)


class AuditChainApi(DashboardApi):
    permission_classes = [role_required(Role.AUDITOR)]

    class QuerySerializer(serializers.Serializer[Any]):
        limit = serializers.IntegerField(
            min_value=1,
            max_value=MAX_LIMIT,
            default=DEFAULT_LIMIT,
            help_text="Entries in the window.",
        )
        before = serializers.IntegerField(
            min_value=1,
            required=False,
            help_text="Only entries with `seq` below this (the previous answer's `next`).",
        )

    class OutputSerializer(serializers.Serializer[Any]):
        class EntrySerializer(serializers.Serializer[Any]):
            seq = serializers.IntegerField(min_value=1)
            action_hash = serializers.CharField()
            kind = serializers.CharField()
            trust_level = serializers.ChoiceField(TRUST_LEVELS)
            claimed_trust_level = serializers.ChoiceField(
                ["", *TRUST_LEVELS],
                required=False,
                help_text="The receipt's own claim where it differs from `trust_level`.",
            )
            receipt_digest = serializers.CharField(help_text="BLAKE3 of `receipt`.")
            supersedes_action_hash = serializers.CharField(allow_null=True)
            superseded_by = serializers.CharField(allow_null=True)
            prev_chain_hash = serializers.CharField()
            chain_hash = serializers.CharField(help_text="server.md §3 link hash.")
            received_at = serializers.DateTimeField()
            receipt = serializers.CharField(
                allow_blank=True,
                help_text="The stored receipt (JCS text); empty once its body is retired "
                "(`retired`): it is then in `archive`, and `receipt_digest` still checks it.",
            )
            retired = serializers.BooleanField(
                help_text="The body is past the org's retention: archived, then retired "
                "from the mirror. The chain and the proofs still verify."
            )
            archive = ArchiveRefField(help_text="Where a retired entry's body is archived.")

            class Meta:
                ref_name = "AuditChainEntry"

        head = serializers.CharField(help_text="The newest chain_hash (64 zeros: empty).")
        size = serializers.IntegerField(min_value=0)
        entries = EntrySerializer(many=True, help_text="Newest first.")
        next = serializers.IntegerField(
            source="next_before",
            allow_null=True,
            help_text="Pass as `before` for the next (older) page; null at the end.",
        )

        class Meta:
            ref_name = "AuditChain"

    @extend_schema(
        operation_id="audit_chain",
        summary="A window of the org's tamper-evident mirror chain, newest first (auditor+)",
        tags=["dashboard"],
        parameters=[QuerySerializer],
        responses={200: ok(OutputSerializer), **keyscoped_errors(403, 422)},
    )
    def get(self, request: Request) -> Response:
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        window = audit_chain_window(
            org=console_principal(request).org,
            limit=query.validated_data["limit"],
            before=query.validated_data.get("before"),
        )
        return Response(self.OutputSerializer(window).data)


class EvidenceExportApi(DashboardApi):
    """POST /v1/evidence/export {from?, to?}: the evidence tar (auditor+), built on disk
    and streamed (constant memory, whatever the window)."""

    permission_classes = [role_required(Role.AUDITOR)]

    class InputSerializer(EvidenceWindowInput):
        class Meta:
            ref_name = "EvidenceExportRequest"

    @extend_schema(
        operation_id="evidence_export",
        summary="The org's evidence tar: receipts, chain window, approvals, keys (auditor+)",
        tags=["dashboard"],
        request=InputSerializer,
        responses={
            (200, "application/x-tar"): OpenApiResponse(
                response=OpenApiTypes.BINARY,
                description="A tar with receipts.jsonl, chain.json, approvals.json, "
                "approver_keys.json, sessions.json (and sessions/NNNN.jsonl), manifest.json "
                "and VERIFY.md.",
            ),
            **keyscoped_errors(403, 422),
        },
    )
    def post(self, request: Request) -> StreamingHttpResponse:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        window = parse_window(data.validated_data.get("from"), data.validated_data.get("to"))
        principal = console_principal(request)
        actor = Actor.api(user=principal.membership.user)
        archive = evidence_export(org=principal.org, window=window, actor=actor)
        return evidence_response(archive, org=principal.org)
