"""The approvals' daily rollups are kept by the database (see ``ApprovalRollup``): a trigger
on ``approvals_approval`` moves each row's contribution in the transaction that writes the
row, on PostgreSQL and on SQLite (the two dialects differ only in how a day and a duration
are computed). The rollups of the approvals already there are filled in the same migration,
after the trigger exists: on PostgreSQL the trigger's creation locks the table against
writes until this migration commits, so nothing is counted twice or missed.

The rule in Python, for the reads that add what is not stored yet and for the tests that
recount: ``apps.approvals.selectors.approval_contribution``.
"""

from django.db import migrations

from apps.common.rls import org_rls

TABLE = "approvals_approvalrollup"
COLUMNS = (
    "opened", "approved", "rejected", "expired", "decided_locally", "decided", "decision_micros",
)  # fmt: skip
SETTLED = ("approved", "rejected", "expired", "decided_locally")
WATCHED = ("org_id", "status", "created_at", "resolved_at")


def _postgresql_day(column: str) -> str:
    return f"(({column}) AT TIME ZONE 'UTC')::date"


def _postgresql_micros(start: str, end: str) -> str:
    return f"GREATEST(0, (extract(epoch FROM {end} - {start}) * 1000000)::bigint)"


def _sqlite_day(column: str) -> str:
    # Django stores a datetime as UTC text, 'YYYY-MM-DD HH:MM:SS[.ffffff]'.
    return f"substr({column}, 1, 10)"


def _sqlite_micros(start: str, end: str) -> str:
    # Whole seconds and microseconds apart: julianday() would round to the millisecond.
    def seconds(column: str) -> str:
        return f"CAST(strftime('%s', substr({column}, 1, 19)) AS INTEGER)"

    def fraction(column: str) -> str:
        return f"CAST(substr({column} || '.000000', 21, 6) AS INTEGER)"

    return (
        f"MAX(0, ({seconds(end)} - {seconds(start)}) * 1000000 "
        f"+ {fraction(end)} - {fraction(start)})"
    )


def contribution(row: str, sign: int, *, day, micros, source: str = "") -> str:
    """What approval ``row`` (``NEW``, ``OLD`` or a table alias in ``source``) adds to the
    rollups, times ``sign``: one row for its opening day, one for its settling day."""
    settled = "\n".join(
        f"    , CASE WHEN {row}.status = '{status}' THEN {sign} ELSE 0 END AS {status}"
        for status in SETTLED
    )
    timed = f"{row}.status IN ('approved', 'rejected') AND {row}.resolved_at IS NOT NULL"
    zeros = ", ".join(f"0 AS {column}" for column in COLUMNS[1:])
    return f"""
    SELECT {row}.org_id AS org_id, {day(f"{row}.created_at")} AS day, {sign} AS opened, {zeros}
    {source}
    UNION ALL
    SELECT {row}.org_id AS org_id, {day(f"COALESCE({row}.resolved_at, {row}.created_at)")} AS day
    , 0 AS opened
{settled}
    , CASE WHEN {timed} THEN {sign} ELSE 0 END AS decided
    , CASE WHEN {timed} THEN {sign} * {micros(f"{row}.created_at", f"{row}.resolved_at")}
      ELSE 0 END AS decision_micros
    {source} WHERE {row}.status <> 'pending'
    """


def _sums(parts: list[str]) -> str:
    sums = ", ".join(f"sum({column}) AS {column}" for column in COLUMNS)
    nonzero = " OR ".join(f"sum({column}) <> 0" for column in COLUMNS)
    union = "\n    UNION ALL\n".join(parts)
    # In day order, so two transactions that change the same two days lock them in turn.
    return (
        f"SELECT org_id, day, {sums} FROM ({union}) AS c WHERE true "
        f"GROUP BY org_id, day HAVING {nonzero} ORDER BY day"
    )


def upsert(parts: list[str], *, excluded: str) -> str:
    """Add the contributions to the rollups, creating a day's row the first time."""
    added = ", ".join(f"{column} = {TABLE}.{column} + {excluded}.{column}" for column in COLUMNS)
    return (
        f"INSERT INTO {TABLE} (org_id, day, {', '.join(COLUMNS)}) {_sums(parts)} "
        f"ON CONFLICT (org_id, day) DO UPDATE SET {added}"
    )


def subtract(parts: list[str]) -> str:
    """Take a deleted approval's contribution off rows that exist. Never creates one: when
    an org is deleted its rollups may be gone before its approvals."""
    moved = ", ".join(f"{column} = {TABLE}.{column} + d.{column}" for column in COLUMNS)
    return (
        f"UPDATE {TABLE} SET {moved} FROM ({_sums(parts)}) AS d "
        f"WHERE {TABLE}.org_id = d.org_id AND {TABLE}.day = d.day"
    )


def backfill(*, day, micros, excluded: str) -> str:
    return upsert(
        [contribution("a", 1, day=day, micros=micros, source="FROM approvals_approval AS a")],
        excluded=excluded,
    )


def _postgresql() -> tuple[list[str], list[str]]:
    sql = {"day": _postgresql_day, "micros": _postgresql_micros}
    new, old = contribution("NEW", 1, **sql), contribution("OLD", -1, **sql)
    changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in WATCHED)
    return [
        f"""
        CREATE FUNCTION approvals_rollup_move() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                {upsert([new], excluded="EXCLUDED")};
            ELSIF TG_OP = 'UPDATE' THEN
                {upsert([old, new], excluded="EXCLUDED")};
            ELSE
                {subtract([old])};
            END IF;
            RETURN NULL;
        END $$
        """,
        "CREATE TRIGGER approvals_rollup_insert AFTER INSERT ON approvals_approval "
        "FOR EACH ROW EXECUTE FUNCTION approvals_rollup_move()",
        f"CREATE TRIGGER approvals_rollup_update AFTER UPDATE OF {', '.join(WATCHED)} "
        f"ON approvals_approval FOR EACH ROW WHEN ({changed}) "
        "EXECUTE FUNCTION approvals_rollup_move()",
        "CREATE TRIGGER approvals_rollup_delete AFTER DELETE ON approvals_approval "
        "FOR EACH ROW EXECUTE FUNCTION approvals_rollup_move()",
        backfill(**sql, excluded="EXCLUDED"),
    ], [
        "DROP TRIGGER IF EXISTS approvals_rollup_insert ON approvals_approval",
        "DROP TRIGGER IF EXISTS approvals_rollup_update ON approvals_approval",
        "DROP TRIGGER IF EXISTS approvals_rollup_delete ON approvals_approval",
        "DROP FUNCTION IF EXISTS approvals_rollup_move()",
        f"DELETE FROM {TABLE}",
    ]


def _sqlite() -> tuple[list[str], list[str]]:
    sql = {"day": _sqlite_day, "micros": _sqlite_micros}
    new, old = contribution("NEW", 1, **sql), contribution("OLD", -1, **sql)
    changed = " OR ".join(f"OLD.{column} IS NOT NEW.{column}" for column in WATCHED)
    return [
        "CREATE TRIGGER approvals_rollup_insert AFTER INSERT ON approvals_approval "
        f"BEGIN {upsert([new], excluded='excluded')}; END",
        f"CREATE TRIGGER approvals_rollup_update AFTER UPDATE OF {', '.join(WATCHED)} "
        f"ON approvals_approval WHEN {changed} "
        f"BEGIN {upsert([old, new], excluded='excluded')}; END",
        "CREATE TRIGGER approvals_rollup_delete AFTER DELETE ON approvals_approval "
        f"BEGIN {subtract([old])}; END",
        backfill(**sql, excluded="excluded"),
    ], [
        "DROP TRIGGER IF EXISTS approvals_rollup_insert",
        "DROP TRIGGER IF EXISTS approvals_rollup_update",
        "DROP TRIGGER IF EXISTS approvals_rollup_delete",
        f"DELETE FROM {TABLE}",
    ]


POSTGRESQL, POSTGRESQL_REVERSE = _postgresql()
SQLITE, SQLITE_REVERSE = _sqlite()


class Migration(migrations.Migration):
    dependencies = [("approvals", "0008_approval_rollups")]

    operations = [
        org_rls(TABLE),
        migrations.RunSQL(
            sql=POSTGRESQL, reverse_sql=POSTGRESQL_REVERSE, hints={"vendor": "postgresql"}
        ),
        migrations.RunSQL(sql=SQLITE, reverse_sql=SQLITE_REVERSE, hints={"vendor": "sqlite"}),
    ]
