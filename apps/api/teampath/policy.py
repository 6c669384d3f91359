"""Team-path policy route: ``GET /v1/teams/{teamId}/policy`` → ``PolicyBundle``.

``version`` is the active policy_id, ``rules`` the §8 rendering of the active TOML
(policy.md §8), ``fetchedAt`` the server clock (RFC 3339, UTC). The team id is the org's
slug and must be the key's own org.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.openapi import ok, path_parameter, teampath_error, teampath_errors
from apps.api.permissions import scope_required, sdk_principal
from apps.api.serializers import RawJsonField
from apps.api.teampath.base import TeamPathApi, team_of_key
from apps.common.timestamps import utc_text
from apps.policy.errors import PolicyNotFound
from apps.policy.fleet import policy_pull_record
from apps.policy.rules import Policy, load_policy, render_policy_json
from apps.policy.selectors import policy_active
from apps.tenancy.models import Scope


@lru_cache(maxsize=64)
def loaded_policy(toml: str) -> Policy:
    """The rules of a deployed TOML. Deploys validated it, so a failure here is a bug (500).

    Cached by text: a deployed text never changes meaning, and the rendering copies every
    mutable value out of the (frozen) rules.
    """
    loaded = load_policy(toml)
    if loaded.policy is None:
        raise RuntimeError(f"a deployed policy no longer loads: {loaded.result}: {loaded.detail}")
    return loaded.policy


class PolicyRuleSerializer(serializers.Serializer[Any]):
    """One rule of the active policy (policy.md §8 rendering); its instance is the rendered
    rule, whose members are already the wire's."""

    class SubjectSerializer(serializers.Serializer[Any]):
        kind = serializers.ChoiceField(["any", "workflow", "account"])
        value = serializers.CharField(required=False)

        class Meta:
            ref_name = "PolicyRuleSubject"

    class ConditionSerializer(serializers.Serializer[Any]):
        field = serializers.CharField()
        op = serializers.CharField()
        value = RawJsonField(help_text="Any JSON value.")
        display = serializers.CharField(allow_null=True)

        class Meta:
            ref_name = "PolicyRuleCondition"

    id = serializers.CharField()
    order = serializers.IntegerField()
    enabled = serializers.BooleanField()
    subject = SubjectSerializer()
    verb = serializers.CharField()
    scope = serializers.CharField()
    decision = serializers.CharField()
    conditions = ConditionSerializer(many=True)
    approvers = serializers.ListField(child=serializers.CharField())
    slaMinutes = serializers.IntegerField(allow_null=True)  # the wire names are camelCase
    clientClearable = serializers.BooleanField()

    class Meta:
        ref_name = "PolicyRule"


class TeamPolicyApi(TeamPathApi):
    permission_classes = [scope_required(Scope.POLICY_READ)]

    class OutputSerializer(serializers.Serializer[Any]):
        version = serializers.CharField(
            source="policy_id", help_text="The active policy id; pin against it."
        )
        rules = PolicyRuleSerializer(many=True, help_text="Evaluation order, first match wins.")
        fetchedAt = serializers.SerializerMethodField()

        class Meta:
            ref_name = "PolicyBundle"

        @extend_schema_field({"type": "string", "format": "date-time"})
        def get_fetchedAt(self, bundle: object) -> str:
            return utc_text(timezone.now(), timespec="seconds")

    @extend_schema(
        operation_id="team_policy",
        summary="The team's policy bundle (scope policy:read)",
        tags=["policy"],
        parameters=[
            path_parameter("team_id", "The team: the key's own org slug.", "^[-a-zA-Z0-9_]+$")
        ],
        responses={
            200: ok(OutputSerializer),
            **teampath_errors(
                s404=teampath_error(
                    ["team_not_found", "policy_not_found", "not_found"],
                    "Not the key's own team, or the team never deployed a policy",
                )
            ),
        },
    )
    def get(self, request: Request, team_id: str) -> Response:
        org = team_of_key(sdk_principal(request), team_id)
        active = policy_active(org=org)
        if active.is_fail_safe:
            raise PolicyNotFound(f"team {team_id!r} has no policy deployed")
        # The fleet view's record of who enforces what; the answer is the same either way.
        policy_pull_record(
            api_key=sdk_principal(request).api_key,
            policy_hash=active.policy_hash,
            user_agent=request.META.get("HTTP_USER_AGENT", ""),
        )
        bundle = {
            "policy_id": active.policy_id,
            "rules": render_policy_json(loaded_policy(active.toml)),
        }
        return Response(self.OutputSerializer(bundle).data)
