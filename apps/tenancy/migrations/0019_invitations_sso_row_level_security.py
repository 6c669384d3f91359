"""Row-level security for invitations and single sign-on, and the two resolvers that find
their org before any org context exists: the invitee is no member yet, and whoever signs in
with single sign-on is not signed in yet."""

from django.db import migrations

from apps.common.rls import org_rls

# Called only with the id of a signed invitation link (apps.tenancy.services.invitations).
INVITATION_ORG = """
CREATE FUNCTION mirror_invitation_org(p_invitation_id bigint)
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT i.org_id FROM tenancy_invitation i WHERE i.id = p_invitation_id
$$
"""

# The org whose enabled single sign-on a sign-in page names: by the org's slug, else by an
# email domain that exactly one org's single sign-on allows.
SSO_ORG = """
CREATE FUNCTION mirror_sso_org(p_key text)
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT COALESCE(
        (SELECT s.org_id FROM tenancy_ssoconfig s JOIN tenancy_org o ON o.id = s.org_id
         WHERE s.enabled AND o.slug = p_key),
        (SELECT min(s.org_id) FROM tenancy_ssoconfig s
         WHERE s.enabled AND s.allowed_domains ? lower(p_key) HAVING count(*) = 1)
    )
$$
"""


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0018_invitations_sso_scim")]

    operations = [
        org_rls("tenancy_invitation"),
        org_rls("tenancy_ssoconfig"),
        org_rls("tenancy_ssoidentity"),
        migrations.RunSQL(
            sql=[INVITATION_ORG, SSO_ORG],
            reverse_sql=[
                "DROP FUNCTION IF EXISTS mirror_invitation_org(bigint)",
                "DROP FUNCTION IF EXISTS mirror_sso_org(text)",
            ],
            hints={"vendor": "postgresql"},
        ),
    ]
