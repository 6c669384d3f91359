"""Migration 0007 on a mirror that holds entries: each one gets its receipt's tool name
(bounded like every lookup column), in batches, and the search indexes are built."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.receipts.columns import indexed_text
from apps.tenancy.org_context import activate_all_orgs
from tests.receipts.factories import Agent, as_text

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

BEFORE = ("receipts", "0006_refusalcount")
AFTER = ("receipts", "0007_lookup_columns")
CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")


def _migrate(target: tuple[str, str]) -> None:
    """Migrate the test database to ``target`` as the tables' owner, as ``migrate`` does."""
    saved = {name: connection.settings_dict.get(name) for name in CREDENTIALS}
    connection.close()
    connection.settings_dict.update(
        {name: settings.MIGRATION_DATABASE.get(name) for name in CREDENTIALS}
    )
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([target])
    finally:
        connection.close()
        connection.settings_dict.update(saved)


def test_the_migration_fills_the_tool_name_of_entries_already_there(cast, monkeypatch) -> None:
    from apps.receipts.migrations import __name__ as package

    migration = __import__(f"{package}.0007_lookup_columns", fromlist=["BATCH"])
    monkeypatch.setattr(migration, "BATCH", 2)  # several batches over five entries
    agent = Agent()
    long_tool = "t" * 250
    receipts = [
        as_text(agent.receipt()),
        as_text(agent.receipt(action={**agent.content()["action"], "tool_name": "deploy"})),
        as_text(agent.receipt(action={**agent.content()["action"], "tool_name": long_tool})),
        "not json",  # a row whose text does not decode keeps the empty default
        as_text(agent.receipt()),
    ]
    _migrate(BEFORE)
    try:
        activate_all_orgs()
        with connection.cursor() as cursor:
            for seq, text in enumerate(receipts, start=1):
                cursor.execute(
                    "INSERT INTO receipts_mirrorentry (org_id, seq, action_hash, receipt, "
                    "receipt_digest, kind, trust_level, claimed_trust_level, "
                    "supersedes_action_hash, superseded_by, prev_chain_hash, chain_hash, "
                    "received_at, session_id, link_hash, operator_key, agent_identity, "
                    "workflow, verb, decision_path, rule_id) VALUES (%s, %s, %s, %s, '', "
                    "'action', 'L0', '', '', '', '', '', now(), '', '', '', '', '', '', '', '')",
                    [cast.acme.pk, seq, f"{seq:064x}", text],
                )
    finally:
        _migrate(AFTER)
    activate_all_orgs()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT seq, tool_name FROM receipts_mirrorentry WHERE org_id = %s ORDER BY seq",
            [cast.acme.pk],
        )
        stored = dict(cursor.fetchall())
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'receipts_mirrorentry' "
            "AND indexname LIKE 'mirror_entry_%%'"
        )
        indexes = {row[0] for row in cursor.fetchall()}
    expected = [json.loads(text)["content"]["action"]["tool_name"] for text in receipts[:3]]
    assert stored == {
        1: expected[0],
        2: "deploy",
        3: indexed_text(long_tool),
        4: "",
        5: json.loads(receipts[4])["content"]["action"]["tool_name"],
    }
    assert len(stored[3]) == 200
    assert {"mirror_entry_tool", "mirror_entry_workflow", "mirror_entry_rule",
            "mirror_entry_agent"} <= indexes  # fmt: skip
