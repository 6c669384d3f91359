"""Database router: lets a migration operation name the database vendor it is for."""

from __future__ import annotations

from typing import Any

from django.db import connections


class VendorRouter:
    """``RunSQL(..., hints={"vendor": "postgresql"})`` runs only on PostgreSQL.

    Row-level-security policies are PostgreSQL SQL; the SQLite trial database skips them.
    """

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        vendor = hints.get("vendor")
        if vendor is not None and connections[db].vendor != vendor:
            return False
        return None
