"""Row-level-security migration operations (PostgreSQL only; skipped on SQLite).

Every org-scoped table gets the same policy: a row is visible and writable only when its
org is in the session's ``app.org_ids`` or ``app.all_orgs`` is on (see
``apps.tenancy.org_context``, the one place those are set). ``current_setting`` is stable
within a statement, so the org filter of a query still uses its index.
"""

from __future__ import annotations

from django.db import migrations

ORG_VISIBLE = (
    "({column} = ANY (string_to_array(NULLIF(current_setting('app.org_ids', true), ''), ',')"
    "::bigint[]) OR current_setting('app.all_orgs', true) = 'on')"
)


def org_rls(table: str, column: str = "org_id") -> migrations.RunSQL:
    """Enable row-level security on ``table`` with the org policy on ``column``."""
    visible = ORG_VISIBLE.format(column=column)
    return migrations.RunSQL(
        sql=[
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"CREATE POLICY org_isolation ON {table} USING {visible} WITH CHECK {visible}",
        ],
        reverse_sql=[
            f"DROP POLICY IF EXISTS org_isolation ON {table}",
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
        ],
        hints={"vendor": "postgresql"},
    )
