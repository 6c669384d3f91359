"""The approval queue in the console: the path the SDK prints, what a pending approval
waits for, its display context and history, and the org's audit log of key changes."""

from __future__ import annotations

from http import HTTPStatus

from django.test import Client

from apps.approvals.services import approval_open, approver_key_register
from tests.approvals.conftest import Approver, suspended_receipt
from tests.console.test_console_admin import member
from tests.receipts.factories import Agent


def test_the_path_the_sdk_prints_leads_to_the_pending_approval_queue(cast) -> None:
    anonymous = Client().get("/approvals")
    assert anonymous.status_code == HTTPStatus.FOUND
    assert anonymous["Location"] == "/admin/approvals/approval/?status__exact=pending"
    queue = member("viewer").get(anonymous["Location"])
    assert queue.status_code == HTTPStatus.OK
    assert "Select approval to view" in queue.content.decode()


def test_a_pending_approval_without_approver_keys_shows_it_waits_for_them(cast) -> None:
    content = suspended_receipt(Agent())["content"]
    approval = approval_open(
        org=cast.acme,
        action_hash=content["action_hash"],
        suspended_content=content,
        threshold=2,
        matched_conditions=[{"field": "verb", "op": "eq", "value": "payment"}],
        scope="payments",
    ).approval
    html = member("viewer").get("/admin/approvals/approval/?status__exact=pending").content.decode()
    assert "approver keys (0 eligible, 2 needed)" in html
    detail = member("viewer").get(f"/admin/approvals/approval/{approval.pk}/change/")
    text = detail.content.decode()
    assert "not frozen yet" in text
    assert "matched_conditions" in text
    assert "payments" in text


def test_an_approval_opened_by_its_hash_before_the_push_waits_for_the_receipt(cast) -> None:
    approval_open(org=cast.acme, action_hash="cd" * 32)
    html = member("viewer").get("/admin/approvals/approval/").content.decode()
    assert "the suspended receipt (opened by its hash; not pushed yet)" in html


def test_a_rotation_through_the_api_shows_in_the_orgs_audit_log(cast) -> None:
    first, second = Approver("old"), Approver("new")
    approver_key_register(org=cast.acme, public_key=first.public, key_id="desk")
    approver_key_register(org=cast.acme, public_key=second.public, key_id="desk")
    html = member("viewer").get("/admin/tenancy/orgauditevent/").content.decode()
    assert "approver key desk rotated" in html
    assert "approver key desk registered" in html
    # Nobody edits it.
    assert member("owner").get("/admin/tenancy/orgauditevent/add/").status_code == 403


def test_another_orgs_approvals_are_not_listed_however_asked_for(cast) -> None:
    theirs = approval_open(org=cast.globex, action_hash="ef" * 32, rule_id="globex.review")
    client = member("owner")
    for params in (
        {"org": cast.globex.pk},
        {"org": cast.globex.pk, "status__exact": "pending"},
        {"q": theirs.approval.approval_id},
        {"org": cast.globex.pk, "q": "ef" * 32},
        {"org": cast.globex.pk, "q": "globex"},
    ):
        html = client.get("/admin/approvals/approval/", params).content.decode()
        assert f"/approval/{theirs.approval.pk}/change/" not in html, params


def test_the_queue_finds_an_approval_by_its_id_hash_or_rule_prefix(cast) -> None:
    opened = approval_open(org=cast.acme, action_hash="ab" * 32, rule_id="payments.review")
    other = approval_open(org=cast.acme, action_hash="cd" * 32, rule_id="refunds.review")
    client = member("viewer")
    found, left = f"/approval/{opened.approval.pk}/change/", f"/approval/{other.approval.pk}/"
    for term in (opened.approval.approval_id, "ab" * 32, "payments", "payments.rev"):
        html = client.get("/admin/approvals/approval/", {"q": term}).content.decode()
        assert found in html, term
        assert left not in html, term
    # The middle of a rule id is not searched.
    html = client.get("/admin/approvals/approval/", {"q": "review"}).content.decode()
    assert found not in html


def test_the_queue_reads_a_pages_votes_receipts_and_names_once_not_per_row(cast, push) -> None:
    """Three approvals with their receipts and a vote cost the page what one costs, but for
    what each pending approval's own roster needs (its eligible keys, before a first vote)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def opened(count: int) -> None:
        for _ in range(count):
            receipt = suspended_receipt(Agent())
            assert push(receipt).status_code == HTTPStatus.CREATED
            approval_open(org=cast.acme, action_hash=receipt["content"]["action_hash"],
                          suspended_content=receipt["content"], threshold=2)  # fmt: skip

    def statements(client: Client) -> tuple[int, str]:
        with CaptureQueriesContext(connection) as seen:
            html = client.get("/admin/approvals/approval/").content.decode()
        votes = sum('"approvals_approvalvote"' in q["sql"] for q in seen.captured_queries)
        receipts = sum('"receipts_mirrorentry"' in q["sql"] for q in seen.captured_queries)
        return votes + receipts, html

    approver_key_register(org=cast.acme, public_key=Approver("desk").public, key_id="desk")
    client = member("viewer")
    opened(1)
    one, _ = statements(client)
    opened(2)
    three, html = statements(client)
    assert html.count("receipt #") == 3
    assert three == one
