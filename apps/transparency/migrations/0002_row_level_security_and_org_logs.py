"""Org-scoped tables under row-level security; published tables append-only; every
existing org gets its log identifier; the log state's one row."""

from typing import Any

from django.db import migrations

from apps.common.rls import org_rls

APPEND_ONLY = ("transparency_topleaf", "transparency_topnode", "transparency_checkpoint")


def _append_only() -> migrations.RunSQL:
    sql = [
        """
        CREATE FUNCTION transparency_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'published transparency rows are never updated or deleted (%)',
                TG_TABLE_NAME;
        END $$
        """
    ]
    reverse = []
    for table in APPEND_ONLY:
        sql.append(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION transparency_refuse_change()"
        )
        reverse.append(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
    reverse.append("DROP FUNCTION IF EXISTS transparency_refuse_change()")
    return migrations.RunSQL(sql=sql, reverse_sql=reverse, hints={"vendor": "postgresql"})


def _org_logs(apps: Any, schema_editor: Any) -> None:
    from apps.transparency.models import new_log_id

    Org = apps.get_model("tenancy", "Org")
    OrgLog = apps.get_model("transparency", "OrgLog")
    LogState = apps.get_model("transparency", "LogState")
    LogState.objects.get_or_create(pk=1)
    existing = set(OrgLog.objects.values_list("org_id", flat=True))
    OrgLog.objects.bulk_create(
        [OrgLog(org_id=pk, log_id=new_log_id()) for pk in Org.objects.values_list("pk", flat=True)
         if pk not in existing]
    )  # fmt: skip


class Migration(migrations.Migration):
    dependencies = [("transparency", "0001_initial"), ("tenancy", "0010_session_token_version")]

    operations = [
        org_rls("transparency_orglog"),
        org_rls("transparency_orgtreenode"),
        _append_only(),
        migrations.RunPython(_org_logs, migrations.RunPython.noop),
    ]
