"""A long-lived org among thousands, and the plan guards that read it.

``scale_org`` (module scope) commits, once per test module, an org of ``SCALE_ENTRIES``
mirror entries beside ``SCALE_ORGS`` orgs of ``SMALL_ORG_ENTRIES`` each, written with
``INSERT … SELECT generate_series`` as the tables' owner (row-level security does not
apply to it), with statistics. A test module that uses it runs its tests in transactions
that roll back (plain ``django_db``), so the rows stay for the module; the fixture empties
the database afterwards, as a transactional test does.

``mirror_plans`` records, while the real request runs, the generic plan of each statement
that reads a watched table (``EXPLAIN ANALYZE`` of the statement prepared with
``plan_cache_mode = force_generic_plan``, executed with the request's own parameters, in
the request's own transaction and org context): what a connection that has prepared the
statement runs, whatever the parameters. ``assert_bounded`` refuses a sequential scan of a
watched table and counts the rows each plan visits there, the rows a filter threw away
included (an index read of the whole org that filters down to one row is a scan too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from apps.approvals.models import Approval
from apps.events.models import Delivery, Event, WebhookEndpoint
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import DEFAULT_SCOPES, Org, OrgAuditEvent, Plan, Role
from apps.tenancy.services import api_key_issue, membership_add, org_create
from apps.transparency.models import OrgTreeNode, TopLeaf
from deploy.bench.bulk_rows import insert_select

ENTRY_TABLE = MirrorEntry._meta.db_table
SCALE_ENTRIES = 200_000
SCALE_ORGS = 3_000
SMALL_ORG_ENTRIES = 10
# One approval per this many entries of the big org (a suspended action, its hash an entry's).
ENTRIES_PER_APPROVAL = 100
# The big org's entries are received one a minute, the newest now: about 1,440 a day.
RECEIVED_EVERY_SECONDS = 60
SESSION_LENGTH = 10
# Published heads of the big org in the top log (one per epoch in which it grew).
SCALE_HEADS = 5_000


def entry_hash(org_id: int, seq: int) -> str:
    """The action hash the bulk rows give entry ``seq`` of ``org_id`` (64 hex digits)."""
    return _md5_pair(f"{org_id}:{seq}")


def _md5_pair(text: str) -> str:
    import hashlib

    first = hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()
    return first + hashlib.md5(f"{text}+".encode(), usedforsecurity=False).hexdigest()


# The same hash in SQL, for generate_series rows: md5(text) || md5(text || '+').
def _sql_hash(text_sql: str) -> str:
    return f"md5({text_sql}) || md5({text_sql} || '+')"


def entry_values(org_sql: str, received_sql: str) -> dict[str, str]:
    """Mirror entry columns of a bulk row ``n`` (its seq) of org ``org_sql``: sessions of
    ``SESSION_LENGTH`` receipts, one L1 entry in seven superseding its predecessor, a few
    agents, workflows, rules and tools, and a receipt of about 300 bytes."""
    hash_of = _sql_hash(f"{org_sql} || ':' || n")
    return {
        "org_id": org_sql,
        "seq": "n",
        "action_hash": hash_of,
        "receipt": (
            """'{"content":{"action":{"tool_name":"tool-' || mod(n, 50) || '","verb":"call",'"""
            """ || '"workflow":"wf-' || mod(n, 20) || '"},"session_id":"s' || (n / 10) || '"},'"""
            """ || '"signatures":[],"pad":"' || repeat('x', 200) || '"}'"""
        ),
        "receipt_digest": hash_of,
        "trust_level": "CASE WHEN mod(n, 7) = 0 THEN 'L1' ELSE 'L0' END",
        "supersedes_action_hash": (
            f"CASE WHEN mod(n, 7) = 0 THEN {_sql_hash(f'{org_sql} || chr(58) || (n - 1)')} "
            "ELSE '' END"
        ),
        "prev_chain_hash": _sql_hash(f"'chain' || {org_sql} || ':' || (n - 1)"),
        "chain_hash": _sql_hash(f"'chain' || {org_sql} || ':' || n"),
        "received_at": received_sql,
        "session_id": f"'s' || (n / {SESSION_LENGTH})",
        "session_seq": f"mod(n, {SESSION_LENGTH})",
        "link_hash": _sql_hash(f"'link' || {org_sql} || ':' || n"),
        "operator_key": "'op-' || mod(n, 5)",
        "agent_identity": "'agent-' || mod(n, 5)",
        "workflow": "'wf-' || mod(n, 20)",
        "verb": "'call'",
        "decision_path": "'allow'",
        "rule_id": "'rule-' || mod(n, 30)",
    }


@dataclass
class ScaleOrg:
    """The big org and what a test needs to call it: its members by role, an SDK key."""

    org: Org
    entries: int
    usernames: dict[str, str]
    sdk_key: str
    approvals: int
    small_orgs: int
    newest: datetime = field(default_factory=timezone.now)

    def action_hash(self, seq: int) -> str:
        return entry_hash(self.org.pk, seq)

    def received_at_seq(self, seq: int) -> datetime:
        from datetime import timedelta

        return self.newest - timedelta(seconds=RECEIVED_EVERY_SECONDS * (self.entries - seq))


def owner_connection() -> psycopg.Connection[Any]:
    """A connection to the test database as the tables' owner (the migration role)."""
    owner = settings.MIGRATION_DATABASE
    credentials = {
        "dbname": connection.settings_dict["NAME"],
        "user": owner.get("USER"),
        "password": owner.get("PASSWORD"),
        "host": owner.get("HOST"),
        "port": owner.get("PORT"),
    }
    return psycopg.connect(**{k: v for k, v in credentials.items() if v}, autocommit=True)


def bulk_load(org: Org, *, entries: int = SCALE_ENTRIES, small_orgs: int = SCALE_ORGS) -> datetime:
    """The big org's entries, head, approvals, tree nodes and published heads, and
    ``small_orgs`` orgs of ``SMALL_ORG_ENTRIES`` entries each; then ANALYZE. Returns when
    the newest entry was received."""
    newest = timezone.now().replace(microsecond=0)
    org_pk = int(org.pk)
    every = f"interval '{RECEIVED_EVERY_SECONDS} seconds'"
    newest_sql = f"'{newest.isoformat()}'::timestamptz"
    with owner_connection() as owner, owner.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tenancy_org (slug, name, plan, created_at) "
            "SELECT 'scale-' || n, 'scale', 'free', now() FROM generate_series(1, %s) AS n",
            [small_orgs],
        )
        insert_select(
            cursor, MirrorEntry,
            entry_values(str(org_pk), f"{newest_sql} - ({entries} - n) * {every}"),
            f"generate_series(1, {int(entries)}) AS n",
        )  # fmt: skip
        insert_select(
            cursor, MirrorEntry,
            entry_values("o.id", f"{newest_sql} - ({SMALL_ORG_ENTRIES} - n) * {every}"),
            f"tenancy_org o, generate_series(1, {SMALL_ORG_ENTRIES}) AS n "
            "WHERE o.slug LIKE 'scale-%%'",
        )  # fmt: skip
        cursor.execute(
            "INSERT INTO receipts_mirrorhead (org_id, size, head, month, month_count) "
            "SELECT o.id, CASE WHEN o.id = %s THEN %s ELSE %s END, '', '', 0 FROM tenancy_org o "
            "WHERE o.id = %s OR o.slug LIKE 'scale-%%' "
            "ON CONFLICT (org_id) DO UPDATE SET size = EXCLUDED.size",
            [org_pk, entries, SMALL_ORG_ENTRIES, org_pk],
        )
        _approvals(cursor, org_pk, entries)
        _tree(cursor, org_pk, entries)
        for model in (MirrorEntry, Org, Approval, OrgTreeNode, TopLeaf):
            cursor.execute(f"ANALYZE {model._meta.db_table}")
        cursor.execute("ANALYZE receipts_mirrorhead")
    return newest


def _approvals(cursor: Any, org_pk: int, entries: int) -> None:
    """An approval per ``ENTRIES_PER_APPROVAL`` entries of the big org (on the entry
    ``n``, ticketed, in its session), half of them decided; one for each small org."""

    def values(org_sql: str) -> dict[str, str]:
        token_hash = _sql_hash(f"'token' || {org_sql} || ':' || n")
        return {
            "org_id": org_sql,
            "approval_id": f"'apr_scale_' || {org_sql} || '_' || n",
            "action_hash": _sql_hash(f"{org_sql} || ':' || n"),
            "ticket_hash": _sql_hash(f"'ticket' || {org_sql} || ':' || n"),
            "status": (
                f"CASE WHEN mod(n / {ENTRIES_PER_APPROVAL}, 2) = 0 THEN 'approved' "
                "ELSE 'pending' END"
            ),
            "rule_id": "'rule-' || mod(n, 30)",
            "workflow": "'wf-' || mod(n, 20)",
            "session_id": f"'s' || (n / {SESSION_LENGTH})",
            "session_seq": f"mod(n, {SESSION_LENGTH})",
            "created_at": f"now() - ({int(entries)} - n) * interval '1 minute'",
            "resolved_at": f"CASE WHEN mod(n / {ENTRIES_PER_APPROVAL}, 2) = 0 THEN now() END",
            "access_token_digest": (
                f"CASE WHEN mod(n / {ENTRIES_PER_APPROVAL}, 2) = 1 THEN {token_hash} ELSE '' END"
            ),
        }

    insert_select(
        cursor, Approval, values(str(org_pk)),
        f"generate_series({ENTRIES_PER_APPROVAL}, {int(entries)}, {ENTRIES_PER_APPROVAL}) AS n",
    )  # fmt: skip
    insert_select(
        cursor, Approval, values("o.id"),
        "tenancy_org o, generate_series(1, 1) AS n WHERE o.slug LIKE 'scale-%%'",
    )  # fmt: skip


def _tree(cursor: Any, org_pk: int, entries: int) -> None:
    """The big org's log: every node of a tree of ``entries`` leaves (hashes made up: the
    plans, not the proofs, are under test), its ``OrgLog`` at that size, and
    ``SCALE_HEADS`` published heads in the top log, the last one covering every entry."""
    level = 0
    while entries >> level:
        cursor.execute(
            "INSERT INTO transparency_orgtreenode (org_id, level, index, hash) "
            "SELECT %s, %s, i, decode(md5(%s || ':' || i) || md5(%s || ':' || i), 'hex') "
            "FROM generate_series(0, %s) AS i",
            [org_pk, level, level, org_pk, (entries >> level) - 1],
        )
        level += 1
    cursor.execute(
        "UPDATE transparency_orglog SET tree_size = %s, published_size = %s, "
        "tree_root = decode(md5('root') || md5('root'), 'hex') WHERE org_id = %s "
        "RETURNING log_id",
        [entries, entries, org_pk],
    )
    (log_id,) = cursor.fetchone()
    step = entries // SCALE_HEADS
    cursor.execute(
        "INSERT INTO transparency_topleaf (index, epoch, log_id, head_org_id, org_tree_size, "
        "org_root, leaf) SELECT i, i + 1, %s, %s, "
        "CASE WHEN i = %s THEN %s ELSE (i + 1) * %s END, "
        "decode(md5('h' || i) || md5('h' || i), 'hex'), '\\x00'::bytea "
        "FROM generate_series(0, %s) AS i",
        [log_id, org_pk, SCALE_HEADS - 1, entries, step, SCALE_HEADS - 1],
    )
    cursor.execute(
        "INSERT INTO transparency_topnode (level, index, hash) SELECT 0, i, "
        "decode(md5('t' || i) || md5('t' || i), 'hex') FROM generate_series(0, %s) AS i",
        [SCALE_HEADS - 1],
    )
    level, width = 1, SCALE_HEADS >> 1
    while width:
        cursor.execute(
            "INSERT INTO transparency_topnode (level, index, hash) SELECT %s, i, "
            "decode(md5('t' || i) || md5('t' || i), 'hex') FROM generate_series(0, %s) AS i",
            [level, width - 1],
        )
        level, width = level + 1, width >> 1
    cursor.execute(
        "INSERT INTO transparency_checkpoint (epoch, size, root, body, published_at) "
        "VALUES (%s, %s, decode(md5('c') || md5('c'), 'hex'), %s, now())",
        [SCALE_HEADS, SCALE_HEADS, f"localhost/v1/log\n{SCALE_HEADS}\nAAAA\n"],
    )


# --- The console lists' rows beside the mirror -----------------------------------------

# Rows of each console list the big org gets from ``bulk_load_lists``: approvals beyond the
# one per ``ENTRIES_PER_APPROVAL`` entries, webhook events (one delivery each, over
# ``SCALE_ENDPOINTS`` endpoints), audit events; and background task results (no org).
LIST_ROWS = 100_000
SCALE_ENDPOINTS = 3
# The statuses of the extra approvals, by n % 10 (every status, most of them decided).
_APPROVAL_STATUS_SQL = (
    "CASE WHEN mod(n, 10) < 3 THEN 'approved' WHEN mod(n, 10) = 3 THEN 'rejected' "
    "WHEN mod(n, 10) = 4 THEN 'expired' WHEN mod(n, 10) = 5 THEN 'decided_locally' "
    "ELSE 'pending' END"
)


def bulk_load_lists(scale: ScaleOrg, *, rows: int = LIST_ROWS) -> None:
    """What the console's other lists read, beside ``bulk_load``'s mirror: ``rows`` more
    approvals of the big org (every status; one in a hundred flagged; decided ones
    resolved up to an hour after they opened), ``rows`` webhook events each delivered to
    one of its ``SCALE_ENDPOINTS`` endpoints (one in fifty failed), ``rows`` audit events,
    ``rows`` task results (one in a hundred failed, over the three queues), and one
    endpoint, event, delivery and audit event for each small org; then VACUUM ANALYZE. Times are
    one every 90 seconds back from ``scale.newest`` (the approvals' interleave the
    existing ones, and some land on the same second: ties the keyset breaks by id)."""
    org_pk = int(scale.org.pk)
    newest = f"'{scale.newest.isoformat()}'::timestamptz"
    at = f"{newest} - n * interval '90 seconds'"
    small = "tenancy_org o, generate_series(1, 1) AS n WHERE o.slug LIKE 'scale-%%'"
    with owner_connection() as owner, owner.cursor() as cursor:
        insert_select(
            cursor, Approval,
            {
                "org_id": str(org_pk),
                "approval_id": "'apr_list_' || n",
                "action_hash": _sql_hash("'list-approval:' || n"),
                "ticket_hash": _sql_hash("'list-ticket:' || n"),
                "status": _APPROVAL_STATUS_SQL,
                "flag": "CASE WHEN mod(n, 100) = 6 THEN 'escalated' ELSE '' END",
                "rule_id": "'rule-' || mod(n, 30)",
                "workflow": "'wf-' || mod(n, 20)",
                "session_id": "'as' || (n / 5)",
                "session_seq": "mod(n, 5)",
                "created_at": at,
                "resolved_at": (
                    f"CASE WHEN mod(n, 10) < 6 THEN {at} + mod(n, 60) * interval '1 minute' END"
                ),
            },
            f"generate_series(1, {int(rows)}) AS n",
        )  # fmt: skip
        endpoint = {
            "endpoint_id": "'ep_scale_' || o.id || '_' || n",
            "url": "'https://hooks.example.com/' || o.id || '/' || n",
            "event_types": "'[\"approval.opened\"]'::jsonb",
            "secret": "'whsec_c2NhbGU='",
            "org_id": "o.id",
        }
        insert_select(
            cursor, WebhookEndpoint, endpoint,
            f"tenancy_org o, generate_series(1, {SCALE_ENDPOINTS}) AS n WHERE o.id = {org_pk}",
        )  # fmt: skip
        insert_select(cursor, WebhookEndpoint, endpoint, small)
        event = {
            "org_id": "o.id",
            "event_id": "'evt_scale_' || o.id || '_' || n",
            "type": "'approval.opened'",
            "payload": "'{}'::jsonb",
            "created_at": at,
        }
        insert_select(
            cursor, Event, event,
            f"tenancy_org o, generate_series(1, {int(rows)}) AS n WHERE o.id = {org_pk}",
        )  # fmt: skip
        insert_select(cursor, Event, event, small)
        # Event n of an org goes to its endpoint number n % (its endpoints).
        insert_select(
            cursor, Delivery,
            {
                "org_id": "e.org_id",
                "endpoint_id": "w.id",
                "event_id": "e.id",
                "status": "CASE WHEN mod(e.id, 50) = 0 THEN 'failed' ELSE 'succeeded' END",
                "attempts": "1",
                "next_attempt_at": "e.created_at",
                "last_attempt_at": "e.created_at",
                "last_status_code": "CASE WHEN mod(e.id, 50) = 0 THEN 500 ELSE 200 END",
                "delivered_at": "CASE WHEN mod(e.id, 50) = 0 THEN NULL ELSE e.created_at END",
                "created_at": "e.created_at",
            },
            "events_event e JOIN (SELECT id, org_id, row_number() OVER (PARTITION BY org_id "
            "ORDER BY id) - 1 AS k, count(*) OVER (PARTITION BY org_id) AS endpoints "
            "FROM events_webhookendpoint) w ON w.org_id = e.org_id "
            "AND w.k = mod(e.id, w.endpoints)",
        )  # fmt: skip
        audit = {
            "org_id": "o.id",
            "at": at,
            "kind": ("CASE WHEN mod(n, 7) = 0 THEN 'api_key.revoked' ELSE 'api_key.issued' END"),
            "summary": "'API key hk_' || n || ' issued'",
            "detail": "'{}'::jsonb",
            "via": "CASE WHEN mod(n, 3) = 0 THEN 'console' ELSE 'api' END",
            "actor": "'scale-owner'",
        }
        insert_select(
            cursor, OrgAuditEvent, audit,
            f"tenancy_org o, generate_series(1, {int(rows)}) AS n WHERE o.id = {org_pk}",
        )  # fmt: skip
        insert_select(cursor, OrgAuditEvent, audit, small)
        insert_select(
            cursor, DBTaskResult,
            {
                "id": "gen_random_uuid()",
                "status": "CASE WHEN mod(n, 100) = 0 THEN 'FAILED' ELSE 'SUCCESSFUL' END",
                "enqueued_at": at,
                "started_at": at,
                "finished_at": at,
                "args_kwargs": "'{\"args\": [], \"kwargs\": {}}'::jsonb",
                "task_path": "'apps.events.tasks.deliver_webhook'",
                "queue_name": (
                    "CASE mod(n, 3) WHEN 0 THEN 'default' WHEN 1 THEN 'periodic' "
                    "ELSE 'deliveries' END"
                ),
                "backend_name": "'default'",
                "run_after": "'9999-01-01'::timestamptz",
                "exception_class_path": "''",
                "traceback": "''",
            },
            f"generate_series(1, {int(rows)}) AS n",
        )  # fmt: skip
        # Vacuumed too, as autovacuum leaves a table whose rows have settled: the
        # visibility map lets a plan read an index alone.
        for model in (Approval, WebhookEndpoint, Event, Delivery, OrgAuditEvent, DBTaskResult):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")


@pytest.fixture(scope="module")
def scale_org(django_db_setup: None, django_db_blocker: Any) -> Iterator[ScaleOrg]:
    """The big org (``SCALE_ENTRIES`` entries) among ``SCALE_ORGS`` small ones, committed
    for the module; the database is emptied afterwards."""
    from django.core.management import call_command

    from apps.tenancy.org_context import activate_all_orgs, activate_default

    with django_db_blocker.unblock():
        activate_all_orgs()
        try:
            org = org_create(slug="scale", name="Scale", plan=Plan.CUSTOM)
            usernames = {}
            for role in Role:
                usernames[role.value] = f"scale-{role.value}"
                membership_add(org=org, username=usernames[role.value], role=role)
            key = api_key_issue(org=org, scopes=DEFAULT_SCOPES, label="scale agent")
            newest = bulk_load(org)
            yield ScaleOrg(
                org=org,
                entries=SCALE_ENTRIES,
                usernames=usernames,
                sdk_key=key.secret,
                approvals=SCALE_ENTRIES // ENTRIES_PER_APPROVAL,
                small_orgs=SCALE_ORGS,
                newest=newest,
            )
        finally:
            activate_all_orgs()
            # What a transactional test does after itself (the sequences are the owner's).
            call_command("flush", interactive=False, verbosity=0, reset_sequences=False)
            activate_default()


# --- Generic plans of the statements a request runs ------------------------------------


@dataclass
class Statement:
    """A statement a request ran, with its plans as they ran (``EXPLAIN ANALYZE``): the
    generic one (any parameter values) and the custom one (these values)."""

    sql: str
    params: tuple[Any, ...]
    plans: dict[str, dict[str, Any]]

    def nodes(self, kind: str) -> list[dict[str, Any]]:
        found, stack = [], [self.plans[kind]]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node.get("Plans", []))
        return found

    def scans(self, table: str, kind: str = "generic") -> list[dict[str, Any]]:
        return [node for node in self.nodes(kind) if node.get("Relation Name") == table]

    def rows_visited(self, table: str, kind: str = "generic") -> int:
        """Rows of ``table`` the plan read, over all loops: those it passed on and those a
        filter or a recheck threw away."""
        visited = 0.0
        for node in self.scans(table, kind):
            rows = (
                node.get("Actual Rows", 0)
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
            visited += rows * node.get("Actual Loops", 1)
        return int(visited)

    def shown(self, kind: str) -> str:
        lines = [
            f"{node['Node Type']} {node.get('Relation Name', '')} {node.get('Index Name', '')} "
            f"rows={node.get('Actual Rows')} loops={node.get('Actual Loops')} "
            f"removed={node.get('Rows Removed by Filter', 0)} "
            f"cond={node.get('Index Cond', '')} filter={node.get('Filter', '')}"
            for node in self.nodes(kind)
            if node.get("Relation Name") or node.get("Index Name")
        ]
        return f"{kind} plan of {self.sql}\n  " + "\n  ".join(lines)


_PLACEHOLDER = re.compile(r"%(%|s)")


def _first_plan(cursor: Any) -> dict[str, Any]:
    (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    node: dict[str, Any] = plan[0]["Plan"]
    return node


def _plans_analyzed(sql: str, params: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """``EXPLAIN ANALYZE`` of ``sql`` on this connection (its transaction, its org
    context), through a cursor of its own: prepared and run on its generic plan, and as
    Django sends it (the values bound client-side: a custom plan)."""
    numbers = iter(range(1, len(params) + 1))
    numbered = _PLACEHOLDER.sub(lambda m: "%" if m[1] == "%" else f"${next(numbers)}", sql)
    raw = psycopg.ClientCursor(connection.connection)
    plans = {}
    try:
        raw.execute("SET plan_cache_mode = force_generic_plan")
        raw.execute(f"PREPARE scale_probe AS {numbered}")
        try:
            values = ", ".join(["%s"] * len(params))
            arguments = f"({values})" if params else ""
            raw.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE scale_probe{arguments}", params)
            plans["generic"] = _first_plan(raw)
        finally:
            raw.execute("DEALLOCATE scale_probe")
            raw.execute("RESET plan_cache_mode")
        raw.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plans["custom"] = _first_plan(raw)
    finally:
        raw.close()
    return plans


def statement_plans(sql: str, params: Sequence[Any]) -> Statement:
    """``sql`` run now with ``params``, with its plans."""
    return Statement(sql, tuple(params), _plans_analyzed(sql, params))


@contextmanager
def mirror_plans(*tables: str) -> Iterator[list[Statement]]:
    """Every statement run meanwhile on the default connection that reads one of
    ``tables`` (the mirror by default), with its plans as it ran at that moment.

    (``CaptureQueriesContext`` keeps each statement with its values written in; a generic
    plan needs the statement and its values apart, so they are taken where Django runs
    them, ``connection.execute_wrapper``.)"""
    watched = tables or (ENTRY_TABLE,)
    statements: list[Statement] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        reads = not many and sql.lstrip().upper().startswith(("SELECT", "WITH"))
        if reads and any(table in sql for table in watched):
            values = tuple(params or ())
            statements.append(Statement(sql, values, _plans_analyzed(sql, values)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield statements


def assert_bounded(statements: list[Statement], table: str = ENTRY_TABLE, *, rows: int) -> None:
    """No statement scans ``table`` sequentially, and none reads more than ``rows`` of it,
    on its generic plan or its custom one."""
    touching = [statement for statement in statements if statement.scans(table)]
    assert touching, f"no statement read {table}"
    for statement in touching:
        for kind in ("generic", "custom"):
            scans = statement.scans(table, kind)
            assert all(node["Node Type"] != "Seq Scan" for node in scans), statement.shown(kind)
            assert statement.rows_visited(table, kind) <= rows, statement.shown(kind)
