"""Team-path policy route: ``GET /v1/teams/{teamId}/policy`` → ``PolicyBundle``.

``version`` is the active policy_id, ``rules`` the §8 rendering of the active TOML
(policy.md §8), ``fetchedAt`` the server clock (RFC 3339, UTC). The team id is the org's
slug and must be the key's own org.
"""

from __future__ import annotations

from datetime import UTC
from functools import lru_cache

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.teampath.base import TeamPathApi, team_of_key
from apps.common.openapi import ok, path_parameter, teampath_error, teampath_errors
from apps.policy.errors import PolicyNotFound
from apps.policy.rules import Policy, load_policy, render_policy_json
from apps.policy.selectors import policy_active
from apps.tenancy.models import Scope
from apps.tenancy.permissions import scope_required, sdk_principal


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


@extend_schema_view(
    get=extend_schema(
        operation_id="team_policy",
        summary="The team's policy bundle (scope policy:read)",
        tags=["policy"],
        parameters=[
            path_parameter("team_id", "The team: the key's own org slug.", "^[-a-zA-Z0-9_]+$")
        ],
        responses={
            200: ok("PolicyBundle"),
            **teampath_errors(
                s404=teampath_error(
                    ["team_not_found", "policy_not_found", "not_found"],
                    "Not the key's own team, or the team never deployed a policy",
                )
            ),
        },
    )
)
class TeamPolicyApi(TeamPathApi):
    permission_classes = [scope_required(Scope.POLICY_READ)]

    def get(self, request: Request, team_id: str) -> Response:
        org = team_of_key(sdk_principal(request), team_id)
        active = policy_active(org=org)
        if active.is_fail_safe:
            raise PolicyNotFound(f"team {team_id!r} has no policy deployed")
        return Response(
            {
                "version": active.policy_id,
                "rules": render_policy_json(loaded_policy(active.toml)),
                "fetchedAt": timezone.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
