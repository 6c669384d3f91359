"""Policy routes: SDK pull (API key) and dashboard deploy and preview (session JWT)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi, KeyScopedSdkApi
from apps.common.openapi import json_body, keyscoped_error, keyscoped_errors, ok
from apps.policy.preview import PreviewReport, policy_preview
from apps.policy.selectors import ActivePolicy, policy_active
from apps.policy.services import policy_deploy, policy_validate
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role, Scope
from apps.tenancy.permissions import (
    console_principal,
    role_required,
    scope_required,
    sdk_principal,
)


def pull_response(active: ActivePolicy) -> dict[str, Any]:
    """``PolicyPullResponse``: what the SDK pins and loads."""
    return {
        "status": "policy",
        "policy_id": active.policy_id,
        "policy_hash": active.policy_hash,
        "toml": active.toml,
    }


@extend_schema_view(
    get=extend_schema(
        operation_id="policy_pull",
        summary="The org's active policy bundle (scope policy:read)",
        tags=["policy"],
        responses={200: ok("PolicyPullResponse"), **keyscoped_errors(403)},
    )
)
class PolicyPullApi(KeyScopedSdkApi):
    permission_classes = [scope_required(Scope.POLICY_READ)]

    def get(self, request: Request) -> Response:
        return Response(pull_response(policy_active(org=sdk_principal(request).org)))


class _TomlField(serializers.CharField):
    """The TOML exactly as sent: never trimmed (its bytes are hashed), empty allowed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_blank=True, trim_whitespace=False, **kwargs)


@extend_schema_view(
    post=extend_schema(
        operation_id="policy_deploy",
        summary="Validate and activate a policy (dashboard, manager or higher)",
        tags=["policy"],
        request=json_body("PolicyDeployRequest"),
        responses={
            200: ok("PolicyPullResponse", "The new pin (the same id and hash for the same TOML)."),
            **keyscoped_errors(
                403,
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
)
class PolicyDeployApi(DashboardApi):
    permission_classes = [role_required(Role.MANAGER)]

    class InputSerializer(serializers.Serializer[Any]):
        toml = _TomlField(max_length=settings.POLICY_MAX_TOML_CHARS)
        expected_policy_hash = serializers.RegexField(
            r"^[0-9a-f]{64}$", required=False, error_messages={"invalid": "64 lowercase hex"}
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
        return Response(
            {
                "status": "policy",
                "policy_id": version.policy_id,
                "policy_hash": version.policy_hash,
                "toml": version.toml,
            },
            status=HTTPStatus.OK,
        )


def preview_response(report: PreviewReport) -> dict[str, Any]:
    return {
        "days": report.days,
        "considered": report.considered,
        "changed": report.changed,
        "unchanged": report.unchanged,
        "rule_only_changed": report.rule_only_changed,
        "truncated": report.truncated,
        "transitions": dict(report.transitions.most_common()),
        "sample": [
            {
                "seq": change.seq,
                "action_hash": change.action_hash,
                "verb": change.verb,
                "workflow": change.workflow,
                "before": {
                    "decision_path": change.before_decision,
                    "rule_id": change.before_rule_id,
                },
                "after": {"decision_path": change.after_decision, "rule_id": change.after_rule_id},
            }
            for change in report.sample
        ],
    }


@extend_schema_view(
    post=extend_schema(
        operation_id="policy_preview",
        summary="Replay recent receipts under a draft policy; deploys nothing (manager+)",
        tags=["policy"],
        request=json_body("PolicyPreviewRequest"),
        responses={
            200: ok("PolicyPreview"),
            **keyscoped_errors(
                403,
                s422=keyscoped_error(
                    "Not JSON or fails validation (`days` out of range), or the draft does not "
                    "parse (`result`).",
                    "PolicyParseError",
                ),
            ),
        },
    )
)
class PolicyPreviewApi(DashboardApi):
    """Replays the org's recent action receipts through a draft policy; deploys nothing."""

    permission_classes = [role_required(Role.MANAGER)]

    class InputSerializer(serializers.Serializer[Any]):
        toml = _TomlField(max_length=settings.POLICY_MAX_TOML_CHARS)
        days = serializers.IntegerField(
            min_value=1, max_value=settings.POLICY_PREVIEW_MAX_DAYS, default=7
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
        return Response(preview_response(report))
