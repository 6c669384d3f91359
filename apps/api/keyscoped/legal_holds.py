"""Dashboard-plane routes of legal holds: the org's holds (auditor+: what is kept, and why,
is part of what an auditor checks), setting one and releasing it (owner only)."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok, path_parameter
from apps.api.permissions import console_principal, role_required
from apps.api.serializers import Rfc3339Field, StrictCharField, _DateText
from apps.audit.holds import legal_hold_release, legal_hold_set
from apps.audit.models import HoldScope, LegalHold
from apps.audit.selectors import legal_hold_get, legal_holds
from apps.audit.window import parse_window
from apps.common.errors import InvalidInput
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Role


class LegalHoldSerializer(serializers.Serializer[Any]):
    """A legal hold: what it covers, why, who set it and, once released, who released it."""

    id = serializers.CharField(source="hold_id", help_text="`hold_…`")
    scope = serializers.ChoiceField(HoldScope.values)
    session_id = serializers.SerializerMethodField(help_text="The held session (`session`).")
    reason = serializers.CharField()
    active = serializers.BooleanField(source="is_active", help_text="Not released.")
    set_by = serializers.CharField(source="set_by_name")
    set_at = Rfc3339Field()
    released_at = Rfc3339Field(allow_null=True)
    released_by = serializers.SerializerMethodField()
    release_reason = serializers.SerializerMethodField()

    class Meta:
        ref_name = "LegalHold"

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        # ``from`` is a Python keyword: the range's days are declared here, in wire order.
        fields = super().get_fields()
        window = {
            name: serializers.DateField(
                source=f"range_{which}", allow_null=True,
                help_text=f"The range's {word} day (UTC, inclusive; null: open or no range).",
            )
            for name, which, word in (("from", "start", "first"), ("to", "end", "last"))
        }  # fmt: skip
        order = ("id", "scope")
        return {
            **{name: fields[name] for name in order},
            **window,
            **{name: field for name, field in fields.items() if name not in order},
        }

    @extend_schema_field({"type": "string", "nullable": True})
    def get_session_id(self, hold: LegalHold) -> str | None:
        return hold.session_id or None

    @extend_schema_field({"type": "string", "nullable": True})
    def get_released_by(self, hold: LegalHold) -> str | None:
        return hold.released_by_name if not hold.is_active else None

    @extend_schema_field({"type": "string", "nullable": True})
    def get_release_reason(self, hold: LegalHold) -> str | None:
        return hold.release_reason or None


class _ClosedInput(serializers.Serializer[Any]):
    """A JSON object with the declared members only."""

    refuses_unknown_members = True  # documented as a closed object (ProfileAutoSchema)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise InvalidInput("the body must be a JSON object")
        unknown = set(data) - set(self.fields)
        if unknown:
            raise InvalidInput(f"unknown member(s): {', '.join(sorted(unknown))}")
        return super().to_internal_value(data)


class _OwnerWrites(DashboardApi):
    """GET (and HEAD) for auditors and above; setting and releasing for owners only."""

    def get_permissions(self) -> Sequence[BasePermission]:
        role = Role.AUDITOR if self.request.method in ("GET", "HEAD") else Role.OWNER
        return [role_required(role)()]


class LegalHoldListApi(_OwnerWrites):
    class InputSerializer(_ClosedInput):
        """What the hold covers (``scope`` and its members) and why."""

        scope = serializers.ChoiceField(HoldScope.values)
        session_id = StrictCharField(required=False, allow_blank=True, max_length=200)
        reason = StrictCharField(max_length=500)

        class Meta:
            ref_name = "LegalHoldSet"

        def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
            fields = super().get_fields()
            window = {
                name: _DateText(
                    required=False, allow_null=True,
                    help_text=f"`range`: the {word} day held, `YYYY-MM-DD` (UTC, inclusive).",
                )
                for name, word in (("from", "first"), ("to", "last"))
            }  # fmt: skip
            return {"scope": fields.pop("scope"), **window, **fields}

    @extend_schema(
        operation_id="legal_holds_list",
        summary="The org's legal holds, active and released, newest first (auditor+)",
        tags=["dashboard"],
        responses={200: ok(LegalHoldSerializer(many=True)), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        holds = legal_holds(org=console_principal(request).org)
        return Response(LegalHoldSerializer(holds, many=True).data)

    @extend_schema(
        operation_id="legal_hold_set",
        summary="Set a legal hold (owner): the whole org, a range of days, or one session",
        description="While a hold is active, what it covers is kept whatever the retention "
        "says: receipt bodies are not retired, evidence exports of it are not deleted. "
        "`scope` `org` takes nothing else; `range` takes `from`, `to` or both; `session` "
        "takes `session_id`. Recorded in the org's audit trail and sent as the "
        "`legal_hold.set` event.",
        request=InputSerializer,
        responses={201: ok(LegalHoldSerializer), **keyscoped_errors(403, 422)},
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        window = parse_window(values.get("from"), values.get("to"))
        member = console_principal(request).membership
        hold = legal_hold_set(
            org=member.org, scope=values["scope"], reason=values["reason"],
            range_start=window.start, range_end=window.end,
            session_id=values.get("session_id", ""), actor=Actor.api(user=member.user),
        )  # fmt: skip
        return Response(LegalHoldSerializer(hold).data, status=HTTPStatus.CREATED)


class LegalHoldReleaseApi(_OwnerWrites):
    class InputSerializer(_ClosedInput):
        """Why the hold is lifted."""

        reason = StrictCharField(max_length=500, help_text="Why the hold is lifted.")

        class Meta:
            ref_name = "LegalHoldRelease"

    @extend_schema(
        operation_id="legal_hold_release",
        summary="Release a legal hold (owner); a release is final",
        description="What the hold covered follows the retention again. Recorded in the "
        "org's audit trail and sent as the `legal_hold.released` event.",
        parameters=[path_parameter("hold_id", "The hold's id (`hold_…`).")],
        request=InputSerializer,
        responses={
            200: ok(LegalHoldSerializer),
            **keyscoped_errors(
                403, 404, 422, s409=keyscoped_error("The hold was released already.")
            ),
        },
    )
    def post(self, request: Request, hold_id: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        member = console_principal(request).membership
        hold = legal_hold_get(org=member.org, hold_id=hold_id)
        released = legal_hold_release(
            hold=hold, reason=data.validated_data["reason"], actor=Actor.api(user=member.user)
        )
        return Response(LegalHoldSerializer(released).data)
