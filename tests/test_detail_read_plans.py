"""The detail reads cost the same in an org of 200,000 entries as in a new one: the
receipt's page (its links, its re-verification and whether the log covers it), the
approval's pages and API answers, the audit chain's windows, the proof route and the
evidence export up to its first byte.

Each test runs the real request against ``scale_org`` (tests/scale.py: the big org among
3,000 small ones, with statistics) and checks the generic plan of every statement it ran
that reads the mirror (and, where the read uses them, the approvals and the published
heads): no sequential scan, and no more rows read than the answer needs.
"""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from apps.approvals.models import Approval
from apps.receipts.models import MirrorEntry
from apps.tenancy.org_context import activate_all_orgs
from apps.transparency.models import TopLeaf
from tests.scale import (
    ENTRIES_PER_APPROVAL,
    ENTRY_TABLE,
    RECEIVED_EVERY_SECONDS,
    SESSION_LENGTH,
    ScaleOrg,
    assert_bounded,
    mirror_plans,
    statement_plans,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

APPROVAL_TABLE = Approval._meta.db_table
HEAD_TABLE = TopLeaf._meta.db_table
TOKEN_FUNCTION = "mirror_approval_by_token_digest"
# A detail read reads a handful of rows: the entry, its chain and session neighbours.
FEW = 20


def console(scale: ScaleOrg, role: str = "owner") -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=scale.usernames[role]))
    return client


def dashboard(scale: ScaleOrg, role: str = "auditor") -> APIClient:
    from apps.tenancy.console_tokens import console_tokens_issue
    from apps.tenancy.org_context import activate_default

    user = get_user_model().objects.get(username=scale.usernames[role])
    tokens = console_tokens_issue(user=user, org_slug=scale.org.slug)
    activate_default()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.access}")
    return client


def entry_pk(scale: ScaleOrg, seq: int) -> int:
    activate_all_orgs()
    pk: int = MirrorEntry.objects.filter(org=scale.org, seq=seq).values_list("pk", flat=True)[0]
    return pk


# An entry in the middle of the chain that starts a session, the L1 form of the receipt
# before it (every seventh entry supersedes its predecessor), with an approval on it.
MIDDLE = 7 * ENTRIES_PER_APPROVAL * SESSION_LENGTH * 10
assert MIDDLE % (7 * ENTRIES_PER_APPROVAL) == 0


@pytest.mark.parametrize("seq", [1, MIDDLE, "newest"])
def test_the_receipt_page_reads_a_handful_of_entries(scale_org: ScaleOrg, seq: Any) -> None:
    seq = scale_org.entries if seq == "newest" else seq
    url = f"/admin/receipts/mirrorentry/{entry_pk(scale_org, seq)}/change/"
    client = console(scale_org)
    with mirror_plans(ENTRY_TABLE, APPROVAL_TABLE, HEAD_TABLE) as statements:
        answer = client.get(url)
    assert answer.status_code == HTTPStatus.OK
    assert f"Receipt #{seq}" in answer.content.decode()
    assert_bounded(statements, rows=FEW)
    # Whether the log covers it: one published head read, whichever epoch covered it first.
    assert_bounded(statements, HEAD_TABLE, rows=FEW)


def test_the_receipt_page_names_the_first_head_that_covers_the_entry(scale_org: ScaleOrg) -> None:
    activate_all_orgs()
    first = TopLeaf.objects.filter(org=scale_org.org).order_by("index").first()
    assert first is not None
    answer = console(scale_org).get(
        f"/admin/receipts/mirrorentry/{entry_pk(scale_org, first.org_tree_size)}/change/"
    )
    assert f"first published in epoch {first.epoch}" in answer.content.decode()
    newest = console(scale_org).get(
        f"/admin/receipts/mirrorentry/{entry_pk(scale_org, scale_org.entries)}/change/"
    )
    last = TopLeaf.objects.filter(org=scale_org.org).order_by("-index").first()
    assert last is not None
    assert f"first published in epoch {last.epoch}" in newest.content.decode()


def test_reverifying_a_receipt_reads_it_and_its_neighbours(scale_org: ScaleOrg) -> None:
    url = f"/admin/receipts/mirrorentry/{entry_pk(scale_org, MIDDLE)}/reverify/"
    client = console(scale_org, "manager")
    with mirror_plans() as statements:
        answer = client.post(url)
    assert answer.status_code == HTTPStatus.FOUND
    assert_bounded(statements, rows=FEW)


def _approval(scale: ScaleOrg, n: int) -> Approval:
    activate_all_orgs()
    return Approval.objects.get(org=scale.org, action_hash=scale.action_hash(n))


def test_the_approval_page_of_the_console_reads_one_approval_and_its_receipt(
    scale_org: ScaleOrg,
) -> None:
    approval = _approval(scale_org, MIDDLE)
    client = console(scale_org)
    with mirror_plans(ENTRY_TABLE, APPROVAL_TABLE) as statements:
        answer = client.get(f"/admin/approvals/approval/{approval.pk}/change/")
    assert answer.status_code == HTTPStatus.OK
    assert f"receipt #{MIDDLE}" in answer.content.decode()
    assert_bounded(statements, rows=FEW)
    assert_bounded(statements, APPROVAL_TABLE, rows=FEW)


def test_the_approvers_signing_page_finds_its_approval_by_an_index(scale_org: ScaleOrg) -> None:
    approval = _approval(scale_org, MIDDLE)
    client = console(scale_org, "viewer")
    with mirror_plans(APPROVAL_TABLE) as statements:
        answer = client.get(f"/approve/{approval.approval_id}")
    assert answer.status_code == HTTPStatus.OK
    assert approval.approval_id in answer.content.decode()
    assert_bounded(statements, APPROVAL_TABLE, rows=FEW)


def test_the_approver_pages_token_finds_its_approval_by_an_index(scale_org: ScaleOrg) -> None:
    """The team-path approver page resolves its token before any org is known, in a
    function of its own (console migration 0001): its one statement, planned for any
    digest."""
    from django.db import connection

    activate_all_orgs()
    tokened = Approval.objects.filter(org=scale_org.org).exclude(access_token_digest="")[0]
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE proname = %s", [TOKEN_FUNCTION])
        (body,) = cursor.fetchone()
    sql = body.strip().replace("p_digest", "%s")
    statement = statement_plans(sql, [tokened.access_token_digest] * sql.count("%s"))
    assert_bounded([statement], APPROVAL_TABLE, rows=FEW)


@pytest.mark.parametrize("by", ["action_hash", "ticket_hash", "unknown"])
def test_the_approval_detail_api_reads_one_approval(scale_org: ScaleOrg, by: str) -> None:
    approval = _approval(scale_org, MIDDLE)
    ref = getattr(approval, by) if by != "unknown" else "ab" * 32
    client = APIClient()
    with mirror_plans(APPROVAL_TABLE) as statements:
        answer = client.get(f"/v1/approvals/{ref}", HTTP_X_API_KEY=scale_org.sdk_key)
    expected = HTTPStatus.NOT_FOUND if by == "unknown" else HTTPStatus.OK
    assert answer.status_code == expected, answer.content
    assert_bounded(statements, APPROVAL_TABLE, rows=FEW)


@pytest.mark.urls("config.urls.teampath")
def test_the_team_path_approval_poll_reads_one_approval(scale_org: ScaleOrg, settings) -> None:
    settings.API_PROFILE = "teampath"
    approval = _approval(scale_org, MIDDLE)
    client = APIClient()
    with mirror_plans(APPROVAL_TABLE) as statements:
        answer = client.get(
            f"/v1/approvals/{approval.approval_id}",
            HTTP_AUTHORIZATION=f"Bearer {scale_org.sdk_key}",
        )
    assert answer.status_code == HTTPStatus.OK, answer.content
    assert_bounded(statements, APPROVAL_TABLE, rows=FEW)


@pytest.mark.parametrize("before", [None, 100_001, 2])
def test_the_audit_chain_window_reads_its_page(scale_org: ScaleOrg, before: int | None) -> None:
    client = dashboard(scale_org)
    query = "?limit=100" + (f"&before={before}" if before else "")
    with mirror_plans() as statements:
        answer = client.get(f"/v1/audit/chain{query}")
    assert answer.status_code == HTTPStatus.OK
    body = answer.json()
    assert body["size"] == scale_org.entries
    assert body["entries"][0]["seq"] == (before or scale_org.entries + 1) - 1
    assert_bounded(statements, rows=100)


@pytest.mark.parametrize("seq", [1, MIDDLE, "newest"])
def test_the_proof_route_reads_one_entry_and_one_head(scale_org: ScaleOrg, seq: Any) -> None:
    seq = scale_org.entries if seq == "newest" else seq
    client = APIClient()
    with mirror_plans(ENTRY_TABLE, HEAD_TABLE, "transparency_orgtreenode") as statements:
        answer = client.get(
            f"/v1/receipts/{scale_org.action_hash(seq)}/proof", HTTP_X_API_KEY=scale_org.sdk_key
        )
    assert answer.status_code == HTTPStatus.OK, answer.content
    assert answer.json()["leaf_index"] == seq - 1
    assert_bounded(statements, rows=FEW)
    assert_bounded(statements, HEAD_TABLE, rows=FEW)
    # The inclusion path: one node per level of the org's tree.
    assert_bounded(statements, "transparency_orgtreenode", rows=2 * 18)


@pytest.mark.urls("config.urls.teampath")
def test_the_team_path_proof_route_reads_one_entry(scale_org: ScaleOrg, settings) -> None:
    settings.API_PROFILE = "teampath"
    client = APIClient()
    with mirror_plans() as statements:
        answer = client.get(
            f"/v1/receipts/{scale_org.action_hash(MIDDLE)}/proof",
            HTTP_AUTHORIZATION=f"Bearer {scale_org.sdk_key}",
        )
    assert answer.status_code == HTTPStatus.OK, answer.content
    assert_bounded(statements, rows=FEW)


def test_the_evidence_export_of_a_day_reads_that_days_entries(scale_org: ScaleOrg) -> None:
    """Up to its first byte (every row is read before it): the window's entries, never the
    org's; the approvals of the window through the window's hashes."""
    day = (scale_org.newest - timedelta(days=30)).date()
    activate_all_orgs()
    in_window = MirrorEntry.objects.filter(org=scale_org.org, received_at__date=day).count()
    assert in_window >= 24 * 3600 // RECEIVED_EVERY_SECONDS - 1
    client = dashboard(scale_org)
    with mirror_plans(ENTRY_TABLE, APPROVAL_TABLE) as statements:
        answer = client.post(
            "/v1/evidence/export", {"from": day.isoformat(), "to": day.isoformat()}, format="json"
        )
        first = next(iter(answer.streaming_content))
    assert answer.status_code == HTTPStatus.OK
    assert first
    answer.close()
    assert_bounded(statements, rows=in_window)
    assert_bounded(statements, APPROVAL_TABLE, rows=in_window)
