"""DRF permissions: API-key scopes (SDK plane) and console roles (dashboard plane).

Compose them with ``&`` / ``|`` as DRF allows, e.g.
``permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apps.api.authentication import ApiKeyPrincipal, ConsolePrincipal
from apps.tenancy.models import ApiKey, Role, Scope


class _HasScope(BasePermission):
    scope: str = ""

    def has_permission(self, request: Request, view: Any) -> bool:
        api_key = request.auth
        return isinstance(api_key, ApiKey) and api_key.has_scope(self.scope)


def scope_required(scope: Scope, *, message: str = "") -> type[BasePermission]:
    """A permission class that admits API keys carrying ``scope``; ``message`` is the 403's
    detail (by default, which scope is missing)."""
    name = "Has" + "".join(part.title() for part in scope.value.replace(":", "_").split("_"))
    return type(
        name,
        (_HasScope,),
        {"scope": scope.value, "message": message or f"API key lacks scope {scope.value}"},
    )


class _HasRole(BasePermission):
    role: Role = Role.OWNER

    def has_permission(self, request: Request, view: Any) -> bool:
        principal: object = request.user
        return isinstance(principal, ConsolePrincipal) and principal.role.at_least(self.role)


def role_required(role: Role) -> type[BasePermission]:
    """A permission class that admits console members with ``role`` or a higher one."""
    return type(
        f"Is{role.value.title()}OrHigher",
        (_HasRole,),
        {"role": role, "message": f"this endpoint needs the {role.value} role or higher"},
    )


def sdk_principal(request: Request) -> ApiKeyPrincipal:
    """The API-key principal of an SDK-plane request (its permission already admitted it)."""
    principal: object = request.user
    assert isinstance(principal, ApiKeyPrincipal)
    return principal


def console_principal(request: Request) -> ConsolePrincipal:
    """The console member of a dashboard-plane request (its permission already admitted it)."""
    principal: object = request.user
    assert isinstance(principal, ConsolePrincipal)
    return principal
