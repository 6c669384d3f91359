"""Row-level security for SCIM provisioning, and the resolver that finds a SCIM token's org
before any org context exists (the identity provider calling is nobody signed in)."""

from django.db import migrations

from apps.common.rls import org_rls

SCIM_TOKEN = """
CREATE FUNCTION mirror_scim_token(p_prefix text)
RETURNS TABLE (token_id bigint, org_id bigint, digest text, revoked boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT t.id, t.org_id, t.digest::text, t.revoked_at IS NOT NULL
    FROM tenancy_scimtoken t WHERE t.prefix = p_prefix
$$
"""


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0019_invitations_sso_row_level_security")]

    operations = [
        org_rls("tenancy_scimtoken"),
        org_rls("tenancy_scimuser"),
        org_rls("tenancy_scimgroup"),
        org_rls("tenancy_scimgroupmember"),
        migrations.RunSQL(
            sql=[SCIM_TOKEN],
            reverse_sql=["DROP FUNCTION IF EXISTS mirror_scim_token(text)"],
            hints={"vendor": "postgresql"},
        ),
    ]
