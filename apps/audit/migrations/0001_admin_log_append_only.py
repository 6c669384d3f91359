"""The console's admin log (``django_admin_log``) is append-only in the database too.

The console already gives nobody change or delete rights on it; this makes the same true for
any SQL the application role runs (an UPDATE or DELETE raises). Deleting a user who has log
entries therefore fails as well: console users are deactivated, never deleted.
"""

from django.db import migrations

FUNCTION = "mirror_admin_log_append_only"


class Migration(migrations.Migration):
    dependencies = [("admin", "0003_logentry_add_action_flag_choices")]

    operations = [
        migrations.RunSQL(
            sql=[
                f"CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN RAISE EXCEPTION 'the admin log is append-only' "
                "USING ERRCODE = 'insufficient_privilege'; END $$",
                f"CREATE TRIGGER {FUNCTION} BEFORE UPDATE OR DELETE ON django_admin_log "
                f"FOR EACH ROW EXECUTE FUNCTION {FUNCTION}()",
            ],
            reverse_sql=[
                f"DROP TRIGGER IF EXISTS {FUNCTION} ON django_admin_log",
                f"DROP FUNCTION IF EXISTS {FUNCTION}()",
            ],
            hints={"vendor": "postgresql"},
        )
    ]
