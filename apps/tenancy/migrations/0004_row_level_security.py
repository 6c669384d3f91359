"""Row-level security for tenancy tables, and the two credential resolvers.

A credential (API key prefix, console member) is resolved before its org is known, so the
lookup cannot run under the org policy. These ``SECURITY DEFINER`` functions, owned by the
migration role, return exactly the one row a credential names and nothing else.
"""

from django.db import migrations

from apps.common.rls import org_rls

API_KEY_LOOKUP = """
CREATE FUNCTION mirror_api_key_lookup(p_prefix text)
RETURNS TABLE (
    key_id bigint, label text, prefix text, digest text, scopes jsonb,
    created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz,
    org_id bigint, slug text, name text, plan text, monthly_receipt_cap bigint,
    org_created_at timestamptz
)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT k.id, k.label::text, k.prefix::text, k.digest::text, k.scopes, k.created_at,
           k.last_used_at, k.revoked_at, o.id, o.slug::text, o.name::text, o.plan::text,
           o.monthly_receipt_cap, o.created_at
    FROM tenancy_apikey k JOIN tenancy_org o ON o.id = k.org_id
    WHERE k.prefix = p_prefix
$$
"""

MEMBER_ORG = """
CREATE FUNCTION mirror_member_org(p_user_id bigint, p_org_slug text)
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT m.org_id FROM tenancy_membership m JOIN tenancy_org o ON o.id = m.org_id
    WHERE m.user_id = p_user_id AND o.slug = p_org_slug
$$
"""

MEMBER_ORGS = """
CREATE FUNCTION mirror_member_orgs(p_user_id bigint)
RETURNS SETOF bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT m.org_id FROM tenancy_membership m WHERE m.user_id = p_user_id
$$
"""


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0003_orderings")]

    operations = [
        org_rls("tenancy_org", column="id"),
        org_rls("tenancy_apikey"),
        org_rls("tenancy_membership"),
        migrations.RunSQL(
            sql=[API_KEY_LOOKUP, MEMBER_ORG, MEMBER_ORGS],
            reverse_sql=[
                "DROP FUNCTION IF EXISTS mirror_api_key_lookup(text)",
                "DROP FUNCTION IF EXISTS mirror_member_org(bigint, text)",
                "DROP FUNCTION IF EXISTS mirror_member_orgs(bigint)",
            ],
            hints={"vendor": "postgresql"},
        ),
    ]
