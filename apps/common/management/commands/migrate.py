"""``migrate`` as the owner role: tables are owned by MIGRATION_DATABASE_URL's user.

The application's own role (DATABASE_URL) is an ordinary role that row-level security
applies to; it cannot own the tables (an owner bypasses its tables' policies). After
migrating, the application role is granted row access to every table and sequence.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import connections

_CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " Runs as MIGRATION_DATABASE_URL's role when it is set."

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        owner = settings.MIGRATION_DATABASE
        app_role = connection.settings_dict.get("USER") or ""
        switch = (
            connection.vendor == "postgresql"
            and options["database"] == "default"
            and owner.get("USER")
            and owner.get("USER") != app_role
        )
        if not switch:
            super().handle(*args, **options)
            return
        saved = {name: connection.settings_dict.get(name) for name in _CREDENTIALS}
        connection.close()
        connection.settings_dict.update({name: owner.get(name) for name in _CREDENTIALS})
        try:
            super().handle(*args, **options)
            grant_application_role(connection, app_role)
        finally:
            connection.close()
            connection.settings_dict.update(saved)


def grant_application_role(connection: Any, role: str) -> None:
    """Row access for the application role; no DDL, no TRUNCATE, no ownership."""
    quoted = connection.ops.quote_name(role)
    with connection.cursor() as cursor:
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {quoted}")
        cursor.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {quoted}"
        )
        cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {quoted}")
        cursor.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {quoted}")
