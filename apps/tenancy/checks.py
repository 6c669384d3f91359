"""Deployment invariants of tenancy, as Django system checks with stable ids.

- ``mirror.E101``: the application's PostgreSQL role is a superuser (row-level security
  does not apply to it).
- ``mirror.E102``: the application's role has BYPASSRLS (tenants would not be isolated).
- ``mirror.W101`` (deploy): single sign-on accepts plain-http issuers
  (``SSO_ALLOW_HTTP_ISSUERS``): ID tokens and client secrets would cross the network in
  clear.

Ids are unique across the project: ``mirror.E0xx``/``W0xx``/``I0xx`` belong to
``apps.common.checks``, ``mirror.E1xx`` to tenancy (tests/common/test_checks.py keeps them
apart).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning
from django.core.checks import register as register_check
from django.db import connections


def role_problems(*, is_superuser: bool, bypasses_rls: bool, role: str) -> list[CheckMessage]:
    """Why the application role cannot be trusted with row-level security, if it can't."""
    problems: list[CheckMessage] = []
    if is_superuser:
        problems.append(
            Error(
                f"the application connects to PostgreSQL as {role!r}, a superuser: row-level "
                "security does not apply to it",
                hint="Connect DATABASE_URL as an ordinary role; run migrations as the owner "
                "through MIGRATION_DATABASE_URL (see deploy/postgres-roles.sql).",
                id="mirror.E101",
            )
        )
    if bypasses_rls:
        problems.append(
            Error(
                f"the application role {role!r} has BYPASSRLS: tenants would not be isolated",
                hint=f"ALTER ROLE {role} NOBYPASSRLS",
                id="mirror.E102",
            )
        )
    return problems


def check_application_role(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """On PostgreSQL, the role of ``DATABASE_URL`` must be subject to row-level security.

    A database check: it runs with ``manage.py check --database default`` (and on migrate).
    """
    if not databases or "default" not in databases:
        return []
    connection = connections["default"]
    if connection.vendor != "postgresql":
        return []
    # The role DATABASE_URL names (kept apart: ``migrate`` briefly connects as the owner),
    # or the session's own when the URL names none.
    app_role = settings.DATABASE_APP_ROLE or None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles "
            "WHERE rolname = COALESCE(%s, session_user)",
            [app_role],
        )
        role, is_superuser, bypasses_rls = cursor.fetchone()
    return role_problems(is_superuser=is_superuser, bypasses_rls=bypasses_rls, role=role)


def http_issuers_allowed(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if settings.SSO_ALLOW_HTTP_ISSUERS:
        return [
            Warning(
                "SSO_ALLOW_HTTP_ISSUERS is on: single sign-on talks to plain-http providers "
                "(client secrets and ID tokens in clear).",
                hint="Leave it off in production; it exists for development and tests.",
                id="mirror.W101",
            )
        ]
    return []


def register() -> None:
    register_check(check_application_role, Tags.database)
    register_check(http_issuers_allowed, "mirror", deploy=True)
