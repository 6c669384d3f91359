"""Policy routes: SDK pull (API key) and dashboard deploy and preview (session JWT)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi, KeyScopedSdkApi
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok
from apps.api.permissions import (
    console_principal,
    role_required,
    scope_required,
    sdk_principal,
)
from apps.api.serializers import HashField, StrictIntegerField
from apps.policy.fleet import policy_pull_record
from apps.policy.preview import DecisionChange, PreviewReport, policy_preview
from apps.policy.selectors import policy_active
from apps.policy.services import policy_deploy, policy_validate
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role, Scope


class PolicyPinSerializer(serializers.Serializer[Any]):
    """What the SDK pins and loads: the pull's answer and the deploy's."""

    status = serializers.SerializerMethodField()
    policy_id = serializers.CharField(help_text='`"pol_" + policy_hash[:24]`')
    policy_hash = HashField(help_text="BLAKE3 of the TOML bytes as deployed.")
    toml = serializers.CharField(
        help_text='The policy TOML; `""` is the fail-safe pin (no policy deployed: every '
        "action routes to a human)."
    )

    class Meta:
        ref_name = "PolicyPullResponse"

    @extend_schema_field({"type": "string", "enum": ["policy"]})
    def get_status(self, pin: object) -> str:
        return "policy"


class PolicyPullApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.POLICY_READ)]

    @extend_schema(
        operation_id="policy_pull",
        summary="The org's active policy bundle (scope policy:read)",
        tags=["policy"],
        responses={200: ok(PolicyPinSerializer), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        principal = sdk_principal(request)
        active = policy_active(org=principal.org)
        # The fleet view's record of who enforces what; the answer is the same either way.
        policy_pull_record(
            api_key=principal.api_key,
            policy_hash=active.policy_hash,
            user_agent=request.META.get("HTTP_USER_AGENT", ""),
        )
        return Response(PolicyPinSerializer(active).data)


class _TomlField(serializers.CharField):
    """The TOML exactly as sent: never trimmed (its bytes are hashed), empty allowed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_blank=True, trim_whitespace=False, **kwargs)


class PolicyDeployApi(DashboardApi):
    permission_classes = [role_required(Role.MANAGER)]

    class InputSerializer(serializers.Serializer[Any]):
        toml = _TomlField(
            max_length=settings.POLICY_MAX_TOML_CHARS,
            help_text="The full policy TOML, never trimmed.",
        )
        expected_policy_hash = HashField(
            required=False,
            error_messages={"invalid": "64 lowercase hex"},
            help_text="Optimistic concurrency: deploy only if this is the active pin.",
        )

        class Meta:
            ref_name = "PolicyDeployRequest"

    @extend_schema(
        operation_id="policy_deploy",
        summary="Validate and activate a policy (dashboard, manager or higher)",
        tags=["policy"],
        request=InputSerializer,
        responses={
            200: ok(PolicyPinSerializer, "The new pin (the same id and hash for the same TOML)."),
            **keyscoped_errors(
                403,
                413,
                s409=keyscoped_error(
                    "A floor-bypass attempt, or `expected_policy_hash` is not the active pin.",
                    "PolicyConflict",
                ),
                s422=keyscoped_error(
                    "Not JSON or fails validation, or the TOML does not parse (`result`).",
                    "PolicyParseError",
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        member = console_principal(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        version = policy_deploy(
            org=member.org,
            toml=data.validated_data["toml"],
            expected_policy_hash=data.validated_data.get("expected_policy_hash"),
            actor=Actor.api(user=member.membership.user),
        )
        return Response(PolicyPinSerializer(version).data, status=HTTPStatus.OK)


class DecisionStepSerializer(serializers.Serializer[Any]):
    decision_path = serializers.CharField()
    rule_id = serializers.CharField()

    class Meta:
        ref_name = "DecisionStep"


class PolicyPreviewApi(DashboardApi):
    """Replays the org's recent action receipts through a draft policy; deploys nothing."""

    permission_classes = [role_required(Role.MANAGER)]

    class InputSerializer(serializers.Serializer[Any]):
        toml = _TomlField(
            max_length=settings.POLICY_MAX_TOML_CHARS, help_text="The draft policy TOML."
        )
        days = StrictIntegerField(
            min_value=1, max_value=settings.POLICY_PREVIEW_MAX_DAYS, default=7
        )

        class Meta:
            ref_name = "PolicyPreviewRequest"

    class OutputSerializer(serializers.Serializer[Any]):
        class ChangeSerializer(serializers.Serializer[Any]):
            seq = serializers.IntegerField()
            action_hash = serializers.CharField()
            verb = serializers.CharField()
            workflow = serializers.CharField()
            before = serializers.SerializerMethodField()
            after = serializers.SerializerMethodField()

            class Meta:
                ref_name = "DecisionChange"

            @extend_schema_field(DecisionStepSerializer)
            def get_before(self, change: DecisionChange) -> dict[str, str]:
                return {"decision_path": change.before_decision, "rule_id": change.before_rule_id}

            @extend_schema_field(DecisionStepSerializer)
            def get_after(self, change: DecisionChange) -> dict[str, str]:
                return {"decision_path": change.after_decision, "rule_id": change.after_rule_id}

        days = serializers.IntegerField()
        considered = serializers.IntegerField(min_value=0)
        changed = serializers.IntegerField(min_value=0)
        unchanged = serializers.IntegerField(min_value=0)
        rule_only_changed = serializers.IntegerField(min_value=0)
        truncated = serializers.BooleanField()
        transitions = serializers.SerializerMethodField(
            help_text='Counts per `"<before> -> <after>"` decision change.'
        )
        sample = ChangeSerializer(many=True)

        class Meta:
            ref_name = "PolicyPreview"

        @extend_schema_field({"type": "object", "additionalProperties": {"type": "integer"}})
        def get_transitions(self, report: PreviewReport) -> dict[str, int]:
            return dict(report.transitions.most_common())

    @extend_schema(
        operation_id="policy_preview",
        summary="Replay recent receipts under a draft policy; deploys nothing (manager+)",
        tags=["policy"],
        request=InputSerializer,
        responses={
            200: ok(OutputSerializer),
            **keyscoped_errors(
                403,
                413,
                s409=keyscoped_error(
                    "The draft would bypass a floor rule (`result`, `rule_id`).", "PolicyConflict"
                ),
                s422=keyscoped_error(
                    "Not JSON or fails validation (`days` out of range), or the draft does not "
                    "parse (`result`).",
                    "PolicyParseError",
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        member = console_principal(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        draft = policy_validate(toml=data.validated_data["toml"])
        report = policy_preview(
            org=member.org,
            draft=draft,
            days=data.validated_data["days"],
            limit=settings.POLICY_PREVIEW_MAX_RECEIPTS,
        )
        return Response(self.OutputSerializer(report).data)
