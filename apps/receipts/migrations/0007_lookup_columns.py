# The console searches the mirror only through indexes (issue 30): the receipt's tool name
# gets a lookup column like workflow, rule and agent identity, filled for the rows already
# there in batches, and each of the four gets a btree (org, column, seq) in the "C"
# collation, so a value or a prefix of it is one range of an index, newest first.
#
# Not atomic: each backfill batch commits on its own (no transaction as long as the table),
# and on PostgreSQL the indexes are built CONCURRENTLY, so pushes go on while they build.

import json

from django.db import migrations, models

import apps.receipts.models

BATCH = 5_000


def _tool_name(receipt: str) -> str:
    from apps.receipts.columns import indexed_text

    try:
        tool = json.loads(receipt)["content"]["action"]["tool_name"]
    except (ValueError, KeyError, TypeError):
        return ""
    return indexed_text(tool) if isinstance(tool, str) else ""


def backfill_tool_names(apps, schema_editor):
    """Each entry's tool name from its stored receipt, BATCH entries at a time in id order
    (one short statement each way a batch; a rerun after a crash skips what is done)."""
    connection = schema_editor.connection
    table = apps.get_model("receipts", "MirrorEntry")._meta.db_table
    postgres = connection.vendor == "postgresql"
    last = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, receipt FROM {table} WHERE id > %s AND tool_name = '' "  # noqa: S608
                "ORDER BY id LIMIT %s",
                [last, BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            named = [(entry_id, _tool_name(receipt)) for entry_id, receipt in rows]
            named = [(entry_id, tool) for entry_id, tool in named if tool]
            if not named:
                continue
            if postgres:
                cursor.execute(
                    f"UPDATE {table} AS entry SET tool_name = named.tool "  # noqa: S608
                    "FROM unnest(%s::bigint[], %s::text[]) AS named(id, tool) "
                    "WHERE entry.id = named.id",
                    [[entry_id for entry_id, _ in named], [tool for _, tool in named]],
                )
            else:
                cursor.executemany(
                    f"UPDATE {table} SET tool_name = %s WHERE id = %s",  # noqa: S608
                    [(tool, entry_id) for entry_id, tool in named],
                )


class AddIndexConcurrently(migrations.AddIndex):
    """CREATE INDEX CONCURRENTLY on PostgreSQL (writes go on while it builds); a plain
    CREATE INDEX elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.add_index(model, self.index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.remove_index(model, self.index, concurrently=True)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("receipts", "0006_refusalcount")]

    operations = [
        migrations.AddField(
            model_name="mirrorentry",
            name="tool_name",
            field=apps.receipts.models.LookupText(
                blank=True, db_default="", default="", max_length=200
            ),
        ),
        # A collation change, no rewrite of the table (no index holds these columns yet).
        migrations.AlterField(
            model_name="mirrorentry",
            name="agent_identity",
            field=apps.receipts.models.LookupText(blank=True, default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="mirrorentry",
            name="rule_id",
            field=apps.receipts.models.LookupText(blank=True, default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="mirrorentry",
            name="workflow",
            field=apps.receipts.models.LookupText(blank=True, default="", max_length=200),
        ),
        migrations.RunPython(backfill_tool_names, migrations.RunPython.noop, atomic=False),
        AddIndexConcurrently(
            model_name="mirrorentry",
            index=models.Index(fields=["org", "tool_name", "seq"], name="mirror_entry_tool"),
        ),
        AddIndexConcurrently(
            model_name="mirrorentry",
            index=models.Index(fields=["org", "workflow", "seq"], name="mirror_entry_workflow"),
        ),
        AddIndexConcurrently(
            model_name="mirrorentry",
            index=models.Index(fields=["org", "rule_id", "seq"], name="mirror_entry_rule"),
        ),
        AddIndexConcurrently(
            model_name="mirrorentry",
            index=models.Index(fields=["org", "agent_identity", "seq"], name="mirror_entry_agent"),
        ),
    ]
