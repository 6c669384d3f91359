"""Policy routes: SDK pull (API key) and dashboard deploy, preview and its replays (session
JWT)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi, KeyScopedSdkApi
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok, path_parameter
from apps.api.permissions import (
    console_principal,
    role_required,
    scope_required,
    sdk_principal,
)
from apps.api.serializers import HashField, Rfc3339Field, StrictIntegerField
from apps.policy.models import PolicyReplay, ReplayStatus
from apps.policy.replay import DecisionChange, Example, Flip, ReplayReport
from apps.policy.selectors import policy_active, policy_replay_get, policy_replay_report
from apps.policy.services import policy_deploy, policy_replay_request
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
        return Response(PolicyPinSerializer(policy_active(org=sdk_principal(request).org)).data)


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


class ReplayExampleSerializer(serializers.Serializer[Example]):
    seq = serializers.IntegerField()
    action_hash = serializers.CharField()
    verb = serializers.CharField()
    workflow = serializers.CharField()
    tool_name = serializers.CharField()
    url = serializers.SerializerMethodField(help_text="The receipt's page in the console.")

    class Meta:
        ref_name = "PolicyReplayExample"

    @extend_schema_field(OpenApiTypes.STR)
    def get_url(self, example: Example) -> str:
        return reverse("admin:receipts_mirrorentry_change", args=[example.pk])


class ReplayFlipSerializer(serializers.Serializer[Flip]):
    """The decisions that flip the same way through the same pair of rules."""

    current = serializers.SerializerMethodField()
    proposed = serializers.SerializerMethodField()
    transition = serializers.CharField(help_text='`"<current> -> <proposed>"`')
    count = serializers.IntegerField(min_value=1)
    examples = ReplayExampleSerializer(many=True)

    class Meta:
        ref_name = "PolicyReplayFlip"

    @extend_schema_field(DecisionStepSerializer)
    def get_current(self, flip: Flip) -> dict[str, str]:
        return {"decision_path": flip.current_decision, "rule_id": flip.current_rule_id}

    @extend_schema_field(DecisionStepSerializer)
    def get_proposed(self, flip: Flip) -> dict[str, str]:
        return {"decision_path": flip.proposed_decision, "rule_id": flip.proposed_rule_id}


class DecisionChangeSerializer(serializers.Serializer[DecisionChange]):
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


def _counter(name: str, help_text: str) -> serializers.IntegerField:
    """A report's count: null until the replay is ready."""
    return serializers.IntegerField(
        source=f"report.{name}", min_value=0, allow_null=True, help_text=help_text
    )


class PolicyReplaySerializer(serializers.Serializer[Any]):
    """A replay of a proposed policy over the org's verified receipts, against the active
    one. Serializes ``{"replay": PolicyReplay, "report": ReplayReport | None}``; the report's
    members are null until ``status`` is `ready`."""

    replay_id = serializers.CharField(source="replay.replay_id")
    status = serializers.ChoiceField(ReplayStatus.values, source="replay.status")
    url = serializers.SerializerMethodField(help_text="Poll here until `status` is `ready`.")
    days = serializers.IntegerField(source="replay.days")
    window_from = Rfc3339Field(source="replay.window_start")
    window_to = Rfc3339Field(source="replay.window_end")
    policy_hash = HashField(source="replay.proposed_policy_hash", help_text="The proposed text's.")
    current_policy_hash = HashField(
        source="replay.current_policy_hash", help_text="The active pin replayed against."
    )
    estimated_receipts = serializers.IntegerField(
        source="replay.estimated_receipts",
        help_text="Receipts the window holds by the daily rollups (whole days): above "
        "`POLICY_REPLAY_INLINE_RECEIPTS` the replay runs in the background.",
    )
    created_at = Rfc3339Field(source="replay.created_at")
    finished_at = Rfc3339Field(source="replay.finished_at", allow_null=True)
    error = serializers.CharField(source="replay.error")
    considered = _counter("considered", "Verified action receipts replayed.")
    changed = _counter("changed", "Of those, decisions that flip.")
    unchanged = _counter("unchanged", "Of those, decisions that stay.")
    rule_only_changed = _counter(
        "rule_only_changed", "Unchanged decisions reached through another rule."
    )
    not_verified = _counter(
        "not_verified", "Receipts left out: the stored text no longer verifies."
    )
    retired = _counter(
        "retired", "Receipts left out: the body is retired (archived past retention)."
    )
    not_actions = _counter(
        "not_actions", "Lifecycle receipts (suspended, approved, ...): nothing to replay."
    )
    superseded = _counter("superseded", "L0 receipts whose L1 form is in the window: counted once.")
    recorded_differs = _counter(
        "recorded_differs",
        "Replayed receipts whose recorded decision differs from the active policy's.",
    )
    truncated = serializers.BooleanField(
        source="report.truncated",
        allow_null=True,
        help_text="The window held more receipts than `POLICY_PREVIEW_MAX_RECEIPTS`: the "
        "newest were replayed, back to `covered_from`.",
    )
    covered_from = serializers.CharField(
        source="report.covered_from",
        allow_null=True,
        help_text="When the oldest receipt read was received.",
    )
    transitions = serializers.SerializerMethodField(
        help_text='Counts per `"<current> -> <proposed>"` decision change.'
    )
    flips = ReplayFlipSerializer(
        many=True, source="report.flips", allow_null=True, help_text="Most receipts first."
    )
    sample = DecisionChangeSerializer(
        many=True, source="report.sample", allow_null=True, help_text="The newest changes."
    )

    class Meta:
        ref_name = "PolicyPreview"

    @extend_schema_field(OpenApiTypes.STR)
    def get_url(self, answer: dict[str, Any]) -> str:
        return reverse("policy-replay", args=[answer["replay"].replay_id])

    @extend_schema_field(
        {"type": "object", "additionalProperties": {"type": "integer"}, "nullable": True}
    )
    def get_transitions(self, answer: dict[str, Any]) -> dict[str, int] | None:
        report: ReplayReport | None = answer["report"]
        return None if report is None else dict(report.transitions.most_common())


def replay_answer(replay: PolicyReplay) -> dict[str, Any]:
    return PolicyReplaySerializer({"replay": replay, "report": policy_replay_report(replay)}).data


class PolicyPreviewApi(DashboardApi):
    """Replays the org's verified receipts of a window through a draft policy and the
    active one; deploys nothing."""

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

    @extend_schema(
        operation_id="policy_preview",
        summary="Replay a window of receipts under a draft policy; deploys nothing (manager+)",
        description="Only receipts that verify again are replayed; the others are counted. "
        "A window the daily rollups count at most `POLICY_REPLAY_INLINE_RECEIPTS` receipts "
        "in is replayed at once (200, `status` `ready`); a larger one runs in the background "
        "(202, `status` `pending`, its report null): poll `url` until it is `ready`.",
        tags=["policy"],
        request=InputSerializer,
        responses={
            200: ok(PolicyReplaySerializer, "Replayed now: the report."),
            202: ok(PolicyReplaySerializer, "Queued: poll `url`."),
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
        replay = policy_replay_request(
            org=member.org,
            toml=data.validated_data["toml"],
            days=data.validated_data["days"],
            requested_by=member.membership.user,
        )
        body = replay_answer(replay)
        if replay.status == ReplayStatus.READY:
            return Response(body)
        response = Response(body, status=HTTPStatus.ACCEPTED)
        response["Location"] = body["url"]
        return response


class PolicyReplayApi(DashboardApi):
    permission_classes = [role_required(Role.MANAGER)]

    @extend_schema(
        operation_id="policy_replay",
        summary="A policy replay's state, and its report once ready (manager+)",
        tags=["policy"],
        parameters=[path_parameter("replay_id", "The replay's id (`rpl_…`).")],
        responses={200: ok(PolicyReplaySerializer), **keyscoped_errors(403, 404)},
    )
    def get(self, request: Request, replay_id: str) -> Response:
        replay = policy_replay_get(org=console_principal(request).org, replay_id=replay_id)
        return Response(replay_answer(replay))
