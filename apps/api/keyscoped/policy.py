"""Policy routes: SDK pull (API key), dashboard deploy, preview and its replays (session
JWT), and the co-signed deploys: the org's quorum (owner), the votes on a proposal and the
approvals of an active version (either plane)."""

from __future__ import annotations

import base64
import binascii
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.http import HttpRequest
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.authentication import (
    ApiKeyAuthentication,
    ApiKeyPrincipal,
    ConsoleJwtAuthentication,
    ConsolePrincipal,
)
from apps.api.keyscoped.base import DashboardApi, KeyScopedSdkApi
from apps.api.openapi import HEX64, keyscoped_error, keyscoped_errors, ok, path_parameter
from apps.api.permissions import (
    console_principal,
    role_required,
    scope_required,
    sdk_principal,
)
from apps.api.serializers import (
    HashField,
    IsoDateTimeField,
    Rfc3339Field,
    StrictCharField,
    StrictIntegerField,
)
from apps.api.throttles import DashboardRateThrottle, OrgRateThrottle
from apps.api.transparency_base import SdkOrSessionAuthentication
from apps.policy.fleet import policy_pull_record
from apps.policy.models import PolicyProposal, PolicyReplay, ReplayStatus
from apps.policy.replay import DecisionChange, Example, Flip, ReplayReport
from apps.policy.selectors import (
    policy_active,
    policy_approvals,
    policy_replay_get,
    policy_replay_report,
    proposal_statement,
)
from apps.policy.services import policy_deploy, policy_replay_request
from apps.policy.statement import POLICY_DEPLOY_SCOPE, statement_bytes
from apps.policy.votes import policy_proposal_vote
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import MAX_POLICY_QUORUM, Role, Scope
from apps.tenancy.services import org_set_policy_quorum


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


class PolicyVoteSerializer(serializers.Serializer[Any]):
    approver_public_key = serializers.CharField(help_text="Standard base64 of the key.")
    key_id = serializers.CharField(source="approver_key_id")
    decision = serializers.ChoiceField(["approved", "rejected"])
    voted_at = IsoDateTimeField()

    class Meta:
        ref_name = "PolicyVote"


class PolicySignedVoteSerializer(PolicyVoteSerializer):
    token_b64 = serializers.CharField(help_text="The approval token as submitted, base64.")

    class Meta:
        ref_name = "PolicySignedVote"


class BreakGlassSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(source="break_glass_reason")
    at = IsoDateTimeField(source="break_glass_at")
    approved_after = IsoDateTimeField(
        source="ratified_at", allow_null=True, help_text="When the quorum approved it since."
    )

    class Meta:
        ref_name = "PolicyBreakGlass"


class _ProposalFields(serializers.Serializer[Any]):
    """What approvers sign and verify, common to a proposal and an activation's approvals."""

    policy_id = serializers.CharField(source="version.policy_id")
    policy_hash = HashField(source="version.policy_hash")
    previous_policy_hash = serializers.SerializerMethodField(
        help_text='The pin it replaces; `""` for the fail-safe empty policy.'
    )
    status = serializers.ChoiceField(["open", "activated", "break_glass", "rejected", "superseded"])
    quorum = serializers.IntegerField(min_value=1, help_text="Approvals it needs.")
    approved_count = serializers.IntegerField(min_value=0)
    scope = serializers.SerializerMethodField(help_text="The scope every vote token carries.")
    statement = serializers.SerializerMethodField(
        help_text="What each token signs: its RFC 8785 canonical bytes are `A` (approvals.md §2)."
    )
    statement_b64 = serializers.SerializerMethodField(
        help_text="`A` itself: the statement's canonical bytes, base64."
    )
    roster = serializers.ListField(
        child=serializers.CharField(),
        help_text="The keys that may vote, frozen at the first vote; empty before it.",
    )
    break_glass = serializers.SerializerMethodField()

    def get_previous_policy_hash(self, proposal: PolicyProposal) -> str:
        return str(proposal_statement(proposal)["previous_policy_hash"])

    @extend_schema_field({"type": "string", "enum": [POLICY_DEPLOY_SCOPE]})
    def get_scope(self, proposal: PolicyProposal) -> str:
        return POLICY_DEPLOY_SCOPE

    @extend_schema_field(
        {
            "type": "object",
            "required": ["type", "org", "policy_hash", "previous_policy_hash", "policy_id"],
            "properties": {
                "type": {"type": "string", "enum": ["countersign.policy_change/v1"]},
                "org": {"type": "string"},
                "policy_hash": {"type": "string"},
                "previous_policy_hash": {"type": "string"},
                "policy_id": {"type": "string"},
            },
        }
    )
    def get_statement(self, proposal: PolicyProposal) -> dict[str, Any]:
        return proposal_statement(proposal)

    def get_statement_b64(self, proposal: PolicyProposal) -> str:
        return base64.b64encode(statement_bytes(proposal_statement(proposal))).decode()

    @extend_schema_field(BreakGlassSerializer(allow_null=True))
    def get_break_glass(self, proposal: PolicyProposal) -> dict[str, Any] | None:
        if proposal.break_glass_at is None:
            return None
        return dict(BreakGlassSerializer(proposal).data)


class PolicyProposalSerializer(_ProposalFields):
    """A co-signed change: what to sign, and the votes so far."""

    diff = serializers.CharField(help_text="Unified diff of the replaced text to this one.")
    replay = serializers.JSONField(
        allow_null=True,
        help_text="The replay of the last `POLICY_PROPOSAL_REPLAY_DAYS` days of verified "
        "receipts under the proposed policy, started when it was proposed: `{replay_id, "
        "days}`; its report at `GET /v1/policy/replays/{replay_id}`.",
    )
    proposed_by = serializers.CharField(source="proposed_by_name")
    created_at = IsoDateTimeField()
    votes = PolicyVoteSerializer(many=True, source="votes.all")

    class Meta:
        ref_name = "PolicyProposal"


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
        break_glass_reason = StrictCharField(
            required=False,
            max_length=2000,
            help_text="Owner only, where the org has a policy quorum: activate at once "
            "without it, for this written reason (recorded, `policy.break_glass` sent).",
        )

        class Meta:
            ref_name = "PolicyDeployRequest"

    @extend_schema(
        operation_id="policy_deploy",
        summary="Validate and activate a policy, or propose it where the org has a quorum "
        "(dashboard, manager or higher)",
        tags=["policy"],
        request=InputSerializer,
        responses={
            200: ok(PolicyPinSerializer, "The new pin (the same id and hash for the same TOML)."),
            202: ok(
                PolicyProposalSerializer,
                "The org needs approvals (`policy_quorum` > 0): the proposal, what to sign "
                "and the votes so far.",
            ),
            **keyscoped_errors(
                403,
                413,
                s409=keyscoped_error(
                    "A floor-bypass attempt, `expected_policy_hash` is not the active pin, or "
                    "another proposal is open (`open_policy_id`).",
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
        reason = data.validated_data.get("break_glass_reason")
        if reason is not None and not member.role.at_least(Role.OWNER):
            raise PermissionDenied("break-glass needs the owner role")
        change = policy_deploy(
            org=member.org,
            toml=data.validated_data["toml"],
            expected_policy_hash=data.validated_data.get("expected_policy_hash"),
            actor=Actor.api(user=member.membership.user),
            break_glass_reason=reason,
        )
        if not change.activated:
            assert change.proposal is not None
            return Response(
                PolicyProposalSerializer(change.proposal).data, status=HTTPStatus.ACCEPTED
            )
        return Response(PolicyPinSerializer(change.version).data, status=HTTPStatus.OK)


class PolicyQuorumApi(DashboardApi):
    """The org's policy quorum: read by any member, set by an owner."""

    permission_classes = [role_required(Role.VIEWER)]

    class InputSerializer(serializers.Serializer[Any]):
        policy_quorum = StrictIntegerField(
            min_value=0,
            max_value=MAX_POLICY_QUORUM,
            help_text="Approvals a policy change needs before it activates; 0: none.",
        )

        class Meta:
            ref_name = "PolicyQuorum"

    @extend_schema(
        operation_id="policy_quorum",
        summary="The org's policy quorum (dashboard, any member)",
        tags=["policy"],
        responses={200: ok(InputSerializer), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        org = console_principal(request).org
        return Response({"policy_quorum": org.policy_quorum})

    @extend_schema(
        operation_id="policy_quorum_set",
        summary="Set how many approver keys must approve a policy change (dashboard, owner)",
        tags=["policy"],
        request=InputSerializer,
        responses={200: ok(InputSerializer), **keyscoped_errors(403, 422)},
    )
    def put(self, request: Request) -> Response:
        member = console_principal(request)
        if not member.role.at_least(Role.OWNER):
            raise PermissionDenied("setting the policy quorum needs the owner role")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        org = org_set_policy_quorum(
            org=member.org,
            quorum=data.validated_data["policy_quorum"],
            actor=Actor.api(user=member.membership.user),
        )
        return Response({"policy_quorum": org.policy_quorum})


class _EitherPlaneApi(KeyScopedSdkApi):
    """An API key or a console session JWT; each credential goes to its own plane's check
    only (as the receipt proof route)."""

    authentication_classes = [ApiKeyAuthentication, ConsoleJwtAuthentication]
    throttle_classes = [OrgRateThrottle, DashboardRateThrottle]

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        initialized = super().initialize_request(request, *args, **kwargs)
        initialized.authenticators = (SdkOrSessionAuthentication(),)
        return initialized

    @staticmethod
    def principal(request: Request) -> ApiKeyPrincipal | ConsolePrincipal:
        principal: object = request.user
        assert isinstance(principal, ApiKeyPrincipal | ConsolePrincipal)
        return principal

    @staticmethod
    def actor(principal: ApiKeyPrincipal | ConsolePrincipal) -> Actor:
        if isinstance(principal, ApiKeyPrincipal):
            return Actor.api(api_key=principal.api_key)
        return Actor.api(user=principal.membership.user)


BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
POLICY_ID_PARAMETER = path_parameter(
    "policy_id", 'The proposed version\'s id (`"pol_" + policy_hash[:24]`).', "^pol_[0-9a-f]{24}$"
)


class PolicyProposalVoteApi(_EitherPlaneApi):
    permission_classes = [scope_required(Scope.APPROVALS_WRITE) | role_required(Role.VIEWER)]

    class InputSerializer(serializers.Serializer[Any]):
        token_b64 = StrictCharField(
            trim_whitespace=False,
            max_length=16_384,
            validators=[RegexValidator(BASE64, message="not valid base64")],
            help_text="An approval token (approvals.md §1) with scope `policy:deploy` over the "
            "proposal's statement, standard base64.",
        )

        class Meta:
            ref_name = "PolicyVoteRequest"

        def validate_token_b64(self, token_b64: str) -> bytes:
            try:
                return base64.b64decode(token_b64, validate=True)
            except (binascii.Error, ValueError):
                raise serializers.ValidationError("not valid base64") from None

    @extend_schema(
        operation_id="policy_proposal_vote",
        summary="Vote on a proposed policy change with an approval token (SDK: "
        "approvals:write; dashboard: any member)",
        tags=["policy"],
        parameters=[POLICY_ID_PARAMETER],
        request=InputSerializer,
        responses={
            200: ok(PolicyProposalSerializer, "The proposal after the vote."),
            **keyscoped_errors(
                403,
                422,
                s403=keyscoped_error(
                    "The credential lacks the scope or role, or the token is rejected (it does "
                    "not verify over the statement, its key is not registered or not on the "
                    "roster, its nonce is spent, it expired, its scope is not "
                    "`policy:deploy`, or its submitter proposed the change)."
                ),
                s404=keyscoped_error("No such proposal for the caller's org."),
                s409=keyscoped_error(
                    "The key already voted, the proposal takes no more votes, or fewer keys "
                    "than the quorum are registered."
                ),
            ),
        },
    )
    def post(self, request: Request, policy_id: str) -> Response:
        principal = self.principal(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = policy_proposal_vote(
            org=principal.org,
            policy_id=policy_id,
            token=data.validated_data["token_b64"],
            actor=self.actor(principal),
        )
        return Response(PolicyProposalSerializer(proposal).data)


class PolicyApprovalsSerializer(_ProposalFields):
    """Everything needed to check offline who approved a version: the statement, its
    canonical bytes and every vote's token."""

    org = serializers.CharField(source="org.slug")
    activated_at = IsoDateTimeField(source="deployment.deployed_at")
    votes = PolicySignedVoteSerializer(many=True, source="votes.all")

    class Meta:
        ref_name = "PolicyApprovals"


class PolicyApprovalsApi(_EitherPlaneApi):
    permission_classes = [scope_required(Scope.POLICY_READ) | role_required(Role.VIEWER)]

    @extend_schema(
        operation_id="policy_approvals",
        summary="The signed approvals that activated a version, for offline verification "
        "(SDK: policy:read; dashboard: any member)",
        tags=["policy"],
        parameters=[path_parameter("policy_hash", "The version's policy_hash.", HEX64)],
        responses={
            200: ok(PolicyApprovalsSerializer),
            **keyscoped_errors(
                403, s404=keyscoped_error("No co-signed activation of this version.")
            ),
        },
    )
    def get(self, request: Request, policy_hash: str) -> Response:
        principal = self.principal(request)
        proposal = policy_approvals(org=principal.org, policy_hash=policy_hash)
        return Response(PolicyApprovalsSerializer(proposal).data)


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
