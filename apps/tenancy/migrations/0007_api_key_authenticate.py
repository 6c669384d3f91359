"""One round trip to authenticate an API key: the resolver also opens the key's org context.

``mirror_api_key_authenticate(prefix, digest)`` returns the key named by ``prefix`` (with
its org), as ``mirror_api_key_lookup`` does, and, only when ``digest`` matches and the key
is not revoked, sets the session's org context to the key's org in the same statement
(``apps.tenancy.org_context`` documents the settings). The caller still compares the
digest itself, in constant time; the database's own comparison only guards the context.
It replaces ``mirror_api_key_lookup``.
"""

import importlib

from django.db import migrations

# The resolver this one replaces, for the reverse migration.
API_KEY_LOOKUP_V2 = importlib.import_module(
    "apps.tenancy.migrations.0005_org_rate_limits"
).API_KEY_LOOKUP_V2

API_KEY_AUTHENTICATE = """
CREATE FUNCTION mirror_api_key_authenticate(p_prefix text, p_digest text)
RETURNS TABLE (
    key_id bigint, label text, prefix text, digest text, scopes jsonb,
    created_at timestamptz, last_used_at timestamptz, revoked_at timestamptz,
    org_id bigint, slug text, name text, plan text, monthly_receipt_cap bigint,
    org_created_at timestamptz, rate_per_minute integer, rate_burst integer
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    RETURN QUERY
    SELECT k.id, k.label::text, k.prefix::text, k.digest::text, k.scopes, k.created_at,
           k.last_used_at, k.revoked_at, o.id, o.slug::text, o.name::text, o.plan::text,
           o.monthly_receipt_cap, o.created_at, o.rate_per_minute, o.rate_burst
    FROM tenancy_apikey k JOIN tenancy_org o ON o.id = k.org_id
    WHERE k.prefix = p_prefix;
    PERFORM set_config('app.org_ids', k.org_id::text, false),
            set_config('app.all_orgs', 'off', false)
    FROM tenancy_apikey k
    WHERE k.prefix = p_prefix AND k.digest = p_digest AND k.revoked_at IS NULL;
END
$$
"""


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0006_org_rate_limits_at_least_one")]

    operations = [
        migrations.RunSQL(
            sql=[API_KEY_AUTHENTICATE, "DROP FUNCTION mirror_api_key_lookup(text)"],
            reverse_sql=[
                "DROP FUNCTION IF EXISTS mirror_api_key_authenticate(text, text)",
                API_KEY_LOOKUP_V2,
            ],
            hints={"vendor": "postgresql"},
        ),
    ]
