"""Console session tokens: obtain (from a logged-in console session) and refresh.

Both answer ``Cache-Control: no-store``, errors included: a token pair is a credential,
which no browser or proxy cache may keep.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.authentication import failures_counted
from apps.api.base import ExceptionHandler
from apps.api.keyscoped.base import keyscoped_exception_handler
from apps.api.openapi import keyscoped_error, keyscoped_errors, ok
from apps.common.errors import Forbidden
from apps.tenancy.console_tokens import (
    ConsoleTokenRefused,
    ConsoleTokens,
    console_tokens_issue,
    console_tokens_refresh,
)
from apps.tenancy.models import Role


class TokenPairOutput(serializers.Serializer[ConsoleTokens]):
    access = serializers.CharField(help_text="Session JWT for the dashboard plane.")
    refresh = serializers.CharField()
    access_expires_at = serializers.DateTimeField()
    role = serializers.ChoiceField(Role.choices)

    class Meta:
        ref_name = "ConsoleTokenPair"


class _ConsoleTokenApi(APIView):
    def get_exception_handler(self) -> ExceptionHandler:
        return keyscoped_exception_handler

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response


class ConsoleTokenObtainApi(_ConsoleTokenApi):
    """POST /v1/console/token {org}: a signed-in console user gets a session JWT pair."""

    authentication_classes = [SessionAuthentication]
    permission_classes = [IsAuthenticated]

    class InputSerializer(serializers.Serializer[dict[str, str]]):
        org = serializers.SlugField()

        class Meta:
            ref_name = "ConsoleTokenRequest"

    @extend_schema(
        operation_id="console_token_obtain",
        summary="A dashboard session JWT pair for a signed-in console member",
        description="Authenticated by the console (Django admin) session cookie, with its CSRF "
        "token in `X-CSRFToken`.",
        tags=["dashboard"],
        request=InputSerializer,
        responses={
            200: ok(TokenPairOutput),
            **keyscoped_errors(
                422,
                credential=False,
                s403=keyscoped_error(
                    "Not signed in to the console, no valid CSRF token, or not a member of the org."
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            tokens = console_tokens_issue(
                user=request.user,  # type: ignore[arg-type]
                org_slug=data.validated_data["org"],
            )
        except ConsoleTokenRefused as refusal:
            raise Forbidden(refusal.message) from refusal
        return Response(TokenPairOutput(tokens).data)


class ConsoleTokenRefreshApi(_ConsoleTokenApi):
    """POST /v1/console/token/refresh {refresh}: a new pair with the member's current role;
    the refresh token presented is spent (a second use is refused and ends the session)."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    class InputSerializer(serializers.Serializer[dict[str, str]]):
        refresh = serializers.CharField()

        class Meta:
            ref_name = "ConsoleTokenRefreshRequest"

    @extend_schema(
        operation_id="console_token_refresh",
        summary="A new session JWT pair with the member's current role (refresh token spent)",
        tags=["dashboard"],
        auth=[],
        request=InputSerializer,
        responses={
            200: ok(TokenPairOutput),
            **keyscoped_errors(
                422,
                s401=keyscoped_error(
                    "The refresh token is refused (forged, expired, or spent: a second use also "
                    "ends the user's session tokens) or its session has ended."
                ),
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # A refused refresh token counts against the client's address, as a failed session
        # token does; past the limit, 429 before the token is looked up.
        with failures_counted(request, ConsoleTokenRefused):
            tokens = console_tokens_refresh(refresh=data.validated_data["refresh"])
        return Response(TokenPairOutput(tokens).data)
