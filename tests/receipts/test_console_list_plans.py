"""The console's receipts list reads no more of the mirror than it shows, at any size.

On an org of 200,000 entries among 3,000 orgs, with statistics: every statement a list
page runs (captured as the request runs it) is planned as a generic plan, which must read
the mirror by an index, never scan it, and replayed under EXPLAIN ANALYZE, which must
visit a bounded number of its rows; no statement counts rows. Each search finds exactly
the receipts it should, newest first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from apps.receipts.models import MirrorEntry
from apps.tenancy.org_context import activate_all_orgs
from tests.analytics.test_rollups import bulk_orgs, mirror_rows_visited
from tests.receipts.test_append_plans import (
    ENTRY_TABLE,
    HEAD_TABLE,
    _analyze,
    _generic_plan,
    _scans,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ENTRIES = 200_000
ORGS = 3_000
LIST = "/admin/receipts/mirrorentry/"
# What one page may visit of the mirror, per statement: a page (51 rows) from each branch
# of a search (an action hash, ten values of each of four columns), or a filter's window.
MOST_ROWS_VISITED = 2_500


def _fill(org_id: int) -> None:
    """ENTRIES entries, one a second up to now: 50 tools, 20 workflows, 10 rules, 5 agents,
    sessions of 100, one L1 in 1,000; and many orgs with their head rows."""
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # the bulk load, not what is measured
        cursor.execute(
            f"""
            INSERT INTO {ENTRY_TABLE} (
                org_id, seq, action_hash, receipt, receipt_digest, kind, trust_level,
                claimed_trust_level, supersedes_action_hash, superseded_by, prev_chain_hash,
                chain_hash, received_at, session_id, session_seq, link_hash, operator_key,
                agent_identity, workflow, verb, decision_path, rule_id, tool_name)
            SELECT %s, n, md5(n::text) || md5((n + 1)::text), repeat('x', 1200), '', 'action',
                   CASE WHEN n %% 1000 = 0 THEN 'L1' ELSE 'L0' END, '', '', '', '', '',
                   now() - (%s - n) * interval '1 second', 's' || (n / 100), n %% 100, '', '',
                   'agent-' || (n %% 5), 'wf/' || (n %% 20), 'tool_call', 'allow',
                   'rule-' || (n %% 10), 'tool-' || (n %% 50)
            FROM generate_series(1, %s) AS n
            """,  # noqa: S608
            [org_id, ENTRIES, ENTRIES],
        )
    bulk_orgs(ORGS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {HEAD_TABLE} (org_id, size, head, month, month_count) "  # noqa: S608
            "SELECT id, CASE WHEN id = %s THEN %s ELSE 0 END, '', '', 0 FROM tenancy_org "
            "ON CONFLICT (org_id) DO UPDATE SET size = EXCLUDED.size",
            [org_id, ENTRIES],
        )
    _analyze(ENTRY_TABLE, HEAD_TABLE, "tenancy_org")


@contextmanager
def statements() -> Iterator[list[tuple[str, Any]]]:
    """Every statement sent on the connection, with its parameters, as it was sent."""
    sent: list[tuple[str, Any]] = []

    def record(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield sent


def _inlined(sql: str, params: Any) -> str:
    with connection.cursor() as cursor:
        return cursor.mogrify(sql, params) if params else sql


def _check_statements(sent: list[tuple[str, Any]], what: str) -> None:
    """No statement counts; each one of the mirror reads it by an index under its generic
    plan and visits a bounded number of its rows."""
    for sql, params in sent:
        assert not re.search(r"\bCOUNT\s*\(", sql, re.IGNORECASE), (what, sql)
        if ENTRY_TABLE not in sql or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        nodes = _generic_plan(sql, list(params or []))
        scans = _scans(nodes, ENTRY_TABLE)
        assert scans, (what, sql)
        assert all(node["Node Type"] != "Seq Scan" for node in scans), (what, sql, params)
        visited = mirror_rows_visited(_inlined(sql, params))
        assert visited <= MOST_ROWS_VISITED, (what, visited, sql)


def _shown(answer: Any) -> list[int]:
    """The seqs a list page shows, in its order."""
    assert answer.status_code == 200, answer
    pks = [
        int(pk)
        for pk in re.findall(r'name="_selected_action" value="(\d+)"', answer.content.decode())
    ]
    seq_of = dict(MirrorEntry.objects.filter(pk__in=pks).values_list("pk", "seq"))
    return [seq_of[pk] for pk in pks]


def _newest(matching: Any, count: int = 50, below: int = ENTRIES) -> list[int]:
    return [n for n in range(below, 0, -1) if matching(n)][:count]


def _older_link(answer: Any) -> str:
    found = re.search(r'href="(\?[^"]*after=[^"]*)" rel="next"', answer.content.decode())
    assert found, "no Older link"
    return found.group(1).replace("&amp;", "&")


def test_every_list_page_and_search_reads_the_mirror_by_index_and_boundedly(cast) -> None:
    activate_all_orgs()
    org = cast.acme
    _fill(org.pk)
    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    assert client.login(username="root", password="pw-root")
    base = {"org": org.pk}
    hash_777 = MirrorEntry.objects.get(org=org, seq=777).action_hash
    cases: list[tuple[str, dict[str, Any], list[int]]] = [
        ("first page", {}, _newest(lambda n: True)),
        ("a tool by name", {"q": "tool-7"}, _newest(lambda n: n % 50 == 7)),
        # Eleven tools start with "tool-4": the first ten (in byte order) are searched.
        ("a tool by prefix", {"q": "tool-4"}, _newest(lambda n: n % 50 in {4, *range(40, 49)})),
        ("a workflow", {"q": "wf/3"}, _newest(lambda n: n % 20 == 3)),
        ("a rule", {"q": "rule-4"}, _newest(lambda n: n % 10 == 4)),
        ("an agent", {"q": "agent-2"}, _newest(lambda n: n % 5 == 2)),
        ("an action hash", {"q": hash_777}, [777]),
        ("a session, in its order", {"q": "s123"}, list(range(12399, 12349, -1))),
        ("nothing", {"q": "no-such-tool"}, []),
        ("the receipt text is not searched", {"q": "xxxx"}, []),
        (
            "L1, a window",
            {"trust_level__exact": "L1"},
            _newest(lambda n: n % 1000 == 0, below=ENTRIES)[:2],
        ),
        ("received today", {"received": "today"}, None),
    ]
    for what, params, expected in cases:
        with statements() as sent:
            answer = client.get(LIST, {**base, **params})
        shown = _shown(answer)
        if expected is not None:
            assert shown == expected, (what, shown[:5], expected[:5])
        else:
            assert len(shown) == 50, what
        _check_statements(sent, what)

    # The pages after: by the cursor of the last row shown, with no count anywhere.
    first = client.get(LIST, base)
    with statements() as sent:
        second = client.get(LIST + _older_link(first))
    assert _shown(second) == _newest(lambda n: True, below=ENTRIES - 50)
    _check_statements(sent, "the second page")
    with statements() as sent:
        searched = client.get(LIST + _older_link(client.get(LIST, {**base, "q": "tool-7"})))
    assert _shown(searched) == _newest(lambda n: n % 50 == 7, count=100)[50:]
    _check_statements(sent, "a search's second page")
    newer = re.search(r'href="(\?[^"]*before=[^"]*)" rel="prev"', second.content.decode())
    assert newer
    assert _shown(client.get(LIST + newer.group(1).replace("&amp;", "&"))) == _newest(
        lambda n: True
    )
    # The total comes from the head row: "of 200,000".
    assert f"of {ENTRIES:,} in acme" in first.content.decode()
