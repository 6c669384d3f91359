"""DRF permissions: API-key scopes on the SDK plane.

Compose them with ``&`` / ``|`` as DRF allows, e.g.
``permission_classes = [scope_required(Scope.RECEIPTS_WRITE)]``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apps.tenancy.models import ApiKey, Scope


class _HasScope(BasePermission):
    scope: str = ""

    def has_permission(self, request: Request, view: Any) -> bool:
        api_key = request.auth
        return isinstance(api_key, ApiKey) and api_key.has_scope(self.scope)


def scope_required(scope: Scope) -> type[BasePermission]:
    """A permission class that admits API keys carrying ``scope``."""
    name = "Has" + "".join(part.title() for part in scope.value.replace(":", "_").split("_"))
    return type(
        name, (_HasScope,), {"scope": scope.value, "message": f"API key lacks scope {scope.value}"}
    )
