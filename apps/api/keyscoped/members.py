"""Dashboard-plane routes of members: invitations to the org (manager+), sent, listed, sent
again and revoked; the invitation link itself only ever goes to the invited address."""

from __future__ import annotations

import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.keyscoped.base import DashboardApi
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok, path_parameter
from apps.api.permissions import console_principal, role_required
from apps.api.serializers import NoMembersSerializer, Rfc3339Field
from apps.common.errors import NotFound
from apps.tenancy.audit_trail import Actor
from apps.tenancy.models import Invitation, InvitationStatus, Role
from apps.tenancy.selectors import invitation_get, invitation_list
from apps.tenancy.services import invitation_create, invitation_resend, invitation_revoke

_ID = re.compile(r"inv_([1-9][0-9]{0,17})")
_INVITATION_ID = path_parameter("invitation_id", "The invitation's id (`inv_…`).", _ID.pattern)


def _invitation_pk(invitation_id: str) -> int:
    match = _ID.fullmatch(invitation_id)
    if match is None:
        raise NotFound(f"no invitation {invitation_id}")
    return int(match.group(1))


class InvitationSerializer(serializers.Serializer[Invitation]):
    """An invitation as every invitation route answers it; never its link."""

    id = serializers.SerializerMethodField(help_text="`inv_…`")
    email = serializers.EmailField()
    role = serializers.ChoiceField(Role.values)
    status = serializers.SerializerMethodField()
    inviter = serializers.CharField(help_text="Who invited, in words (a username).")
    sent_at = Rfc3339Field()
    sent_count = serializers.IntegerField()
    expires_at = Rfc3339Field(source="link_expires_at")
    accepted_at = Rfc3339Field(allow_null=True)
    revoked_at = Rfc3339Field(allow_null=True)

    class Meta:
        ref_name = "Invitation"

    def get_id(self, invitation: Invitation) -> str:
        return f"inv_{invitation.pk}"

    @extend_schema_field(serializers.ChoiceField(InvitationStatus.values))
    def get_status(self, invitation: Invitation) -> str:
        return str(invitation.status_at(timezone.now()).value)


class _ManagersOnly(DashboardApi):
    permission_classes = [role_required(Role.MANAGER)]


class InvitationListApi(_ManagersOnly):
    class InputSerializer(serializers.Serializer[Any]):
        email = serializers.EmailField(max_length=254)
        role = serializers.ChoiceField(Role.values)

        class Meta:
            ref_name = "InvitationCreate"

    @extend_schema(
        operation_id="invitations_list",
        summary="The org's invitations, newest first (manager+)",
        tags=["members"],
        responses={200: ok(InvitationSerializer(many=True)), **keyscoped_errors(403)},
    )
    def get(self, request: Request) -> Response:
        invitations = invitation_list(org=console_principal(request).org)
        return Response(InvitationSerializer(invitations, many=True).data)  # type: ignore[arg-type]

    @extend_schema(
        operation_id="invitation_create",
        summary="Invite an email address with a role, never above your own (manager+); the "
        "link is emailed to that address",
        tags=["members"],
        request=InputSerializer,
        responses={
            201: ok(InvitationSerializer),
            **keyscoped_errors(
                403, 422,
                s409=keyscoped_error("Already a member, or a pending invitation exists."),
            ),
        },
    )  # fmt: skip
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        member = console_principal(request)
        invitation = invitation_create(
            org=member.org, email=data.validated_data["email"], role=data.validated_data["role"],
            actor=Actor.api(user=member.membership.user),
        )  # fmt: skip
        return Response(InvitationSerializer(invitation).data, status=HTTPStatus.CREATED)


class InvitationDetailApi(_ManagersOnly):
    @extend_schema(
        operation_id="invitation_detail",
        summary="One invitation (manager+)",
        tags=["members"],
        parameters=[_INVITATION_ID],
        responses={200: ok(InvitationSerializer), **keyscoped_errors(403, 404)},
    )
    def get(self, request: Request, invitation_id: str) -> Response:
        invitation = invitation_get(
            org=console_principal(request).org, invitation_id=_invitation_pk(invitation_id)
        )
        return Response(InvitationSerializer(invitation).data)


_CLOSED = keyscoped_error("The invitation was accepted or revoked already.")


def _invitation_changed(
    request: Request, invitation_id: str, change: Callable[..., Invitation]
) -> Response:
    """Resend and revoke alike: no body, the invitation by its id, changed by the member."""
    if request.body:
        NoMembersSerializer(data=request.data).is_valid(raise_exception=True)
    member = console_principal(request)
    invitation = change(
        org=member.org, invitation_id=_invitation_pk(invitation_id),
        actor=Actor.api(user=member.membership.user),
    )  # fmt: skip
    return Response(InvitationSerializer(invitation).data)


class InvitationResendApi(_ManagersOnly):
    @extend_schema(
        operation_id="invitation_resend",
        summary="Send an invitation again: a new link (the previous one stops working) and a "
        "new expiry; an expired invitation is revived (manager+)",
        tags=["members"],
        parameters=[_INVITATION_ID],
        request=NoMembersSerializer,
        responses={
            200: ok(InvitationSerializer),
            **keyscoped_errors(403, 404, 422, s410=_CLOSED),
        },
    )
    def post(self, request: Request, invitation_id: str) -> Response:
        return _invitation_changed(request, invitation_id, invitation_resend)


class InvitationRevokeApi(_ManagersOnly):
    @extend_schema(
        operation_id="invitation_revoke",
        summary="Revoke an invitation: its link stops working for good (manager+)",
        tags=["members"],
        parameters=[_INVITATION_ID],
        request=NoMembersSerializer,
        responses={
            200: ok(InvitationSerializer),
            **keyscoped_errors(403, 404, 422, s410=_CLOSED),
        },
    )
    def post(self, request: Request, invitation_id: str) -> Response:
        return _invitation_changed(request, invitation_id, invitation_revoke)
