"""``migrate`` as the owner role: tables are owned by MIGRATION_DATABASE_URL's user.

The application's own role (DATABASE_URL) is an ordinary role that row-level security
applies to; it cannot own the tables (an owner bypasses its tables' policies). After
migrating, the application role is granted row access to every table and sequence.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import DatabaseError, connections
from django.db.migrations.exceptions import MigrationSchemaMissing

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
            self.migrate_as(connection, *args, **options)
            return
        saved = {name: connection.settings_dict.get(name) for name in _CREDENTIALS}
        connection.close()
        connection.settings_dict.update({name: owner.get(name) for name in _CREDENTIALS})
        try:
            self.migrate_as(connection, *args, **options)
            grant_application_role(connection, app_role)
        finally:
            connection.close()
            connection.settings_dict.update(saved)

    def migrate_as(self, connection: Any, *args: Any, **options: Any) -> None:
        """Django's migrate; a role that may not create or alter the tables (the
        application's own, the usual mistake) is one line naming the setting, not a
        traceback. Each migration is its own transaction: nothing is half-applied."""
        try:
            super().handle(*args, **options)
        except (DatabaseError, MigrationSchemaMissing) as error:
            denied = _insufficient_privilege(error)
            if denied is None:
                raise
            role = connection.settings_dict.get("USER") or "(default)"
            raise ImproperlyConfigured(
                f"migrate connected as role {role!r}, which may not create or change the "
                f"tables ({' '.join(str(denied).split())}). Migrations run as the "
                "tables' owner: set MIGRATION_DATABASE_URL to the owner role's URL "
                "(DATABASE_URL stays the application role; see docs/production.md)."
            ) from None


def _insufficient_privilege(error: BaseException) -> BaseException | None:
    """PostgreSQL's "permission denied" anywhere in ``error``'s chain of causes."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, psycopg.errors.InsufficientPrivilege):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


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
