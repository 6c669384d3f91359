"""Resolve an approver-page token before its org is known (row-level security).

The team-path approver page is reached with a one-time token and no credential naming an
org, so the approval cannot be looked up under the org policy. Like the credential
resolvers of tenancy's RLS migration, this ``SECURITY DEFINER`` function (owned by the
migration role) returns exactly the one approval a token digest names, and nothing else.
"""

from django.db import migrations

APPROVAL_BY_TOKEN_DIGEST = """
CREATE FUNCTION mirror_approval_by_token_digest(p_digest text)
RETURNS TABLE (approval_pk bigint, org_id bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT a.id, a.org_id FROM approvals_approval a
    WHERE p_digest <> '' AND a.access_token_digest = p_digest
$$
"""


class Migration(migrations.Migration):
    dependencies = [("approvals", "0003_approval_provisional")]

    operations = [
        migrations.RunSQL(
            sql=[APPROVAL_BY_TOKEN_DIGEST],
            reverse_sql=["DROP FUNCTION IF EXISTS mirror_approval_by_token_digest(text)"],
            hints={"vendor": "postgresql"},
        ),
    ]
