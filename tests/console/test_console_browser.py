"""The console in headless Chromium, signed in as each role: the receipts list readable at
1366 px, its links, the approval queue, the org dashboard, empty states and the product name.

(Every screen's layout, and ``make screenshots``: tests/console/test_console_screens.py.)
"""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus
from typing import Any

import pytest
from django.utils import timezone

from apps.approvals.models import Approval
from apps.approvals.services import approval_open, approver_key_register
from apps.console.demo import demo_bootstrap
from apps.receipts.models import MirrorEntry
from apps.tenancy.models import Plan, Role
from apps.tenancy.services import membership_add, org_create
from tests.approvals.conftest import Approver, suspended_receipt
from tests.receipts.factories import Agent

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ["viewer", "auditor", "manager", "owner"]
WIDTH = 1366


@pytest.fixture
def demo(cast, push) -> dict[str, Any]:
    """Receipts of several kinds in one agent session, a suspended payment with its pending
    approval, a decided approval, and a labelled approver key."""
    agent = Agent()
    receipts = agent.session("sess-demo", 3)
    for receipt in receipts:
        assert push(receipt).status_code == HTTPStatus.CREATED
    redacted = agent.receipt(
        action={"verb": "llm_call", "tool_name": "gpt-summarize", "workflow": "support/triage",
                "account": "org/unit", "fields": {"prompt": "[redacted]"}},
        policy={"rule_id": "llm.redact", "rule_display": "Redact prompts.",
                "matched_conditions": [], "decision_path": "redact"},
    )  # fmt: skip
    assert push(redacted).status_code == HTTPStatus.CREATED
    suspended = suspended_receipt(agent)
    assert push(suspended).status_code == HTTPStatus.CREATED
    approver = Approver("alice")
    approver_key_register(
        org=cast.acme, public_key=approver.public, key_id="alice", label="Alice's laptop",
    )  # fmt: skip
    content = suspended["content"]
    pending = approval_open(
        org=cast.acme,
        action_hash=content["action_hash"],
        suspended_content=content,
        rule_id="payments.review",
        workflow="ops/nightly",
    ).approval
    decided = approval_open(org=cast.acme, action_hash="ab" * 32, rule_id="refunds.review").approval
    Approval.objects.filter(pk=decided.pk).update(status="rejected", resolved_at=timezone.now())
    return {
        "session": [r["content"]["action_hash"] for r in receipts],
        "suspended": content["action_hash"],
        "pending": pending,
        "decided": decided,
    }


def sign_in(page: Any, live_server: Any, role: str) -> None:
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", f"acme-{role}")
    page.fill("#id_password", f"pw-{role}")
    page.click("button[type=submit], input[type=submit]")
    # A member of one org lands on its dashboard.
    page.wait_for_url("**/admin/tenancy/org/*/dashboard/")


def entry(action_hash: str) -> MirrorEntry:
    return MirrorEntry.objects.get(action_hash=action_hash)


@pytest.mark.parametrize("role", ROLES)
def test_each_role_reads_the_receipts_list_at_1366_px(page, live_server, demo, role) -> None:
    sign_in(page, live_server, role)
    assert "Countersign" in page.title()
    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/")
    headers = page.locator("#result_list thead th").all_inner_texts()
    text = " | ".join(headers).lower()
    for column in ["received", "agent", "action", "policy decision", "trust", "kind", "hash"]:
        assert column in text, (column, headers)
    # Every column is on screen: nothing scrolls sideways at 1366 px.
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    overflowing = page.evaluate(
        """() => [...document.querySelectorAll('*')]
                .filter(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0
                             && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
                .map(e => `${e.tagName}.${e.className} ${e.scrollWidth}>${e.clientWidth}`)"""
    )
    assert overflowing == []
    right = page.evaluate(
        "Math.max(...[...document.querySelectorAll('#result_list th')]"
        ".map(e => e.getBoundingClientRect().right))"
    )
    assert right <= WIDTH
    body = page.locator("#result_list").inner_text()
    assert "tool_call search" in body
    assert "llm_call gpt-summarize" in body
    assert "redact" in body
    assert "require_approval" in body
    # The hash: shortened, the full one on hover, a copy button carrying it.
    full = demo["suspended"]
    code = page.locator(f"#result_list code[title='{full}']")
    assert code.inner_text() == f"{full[:12]}…"
    assert page.locator(f"#result_list button.copy-button[data-copy='{full}']").count() == 1
    # The search box says what it searches; tool and workflow are found.
    assert "tool, workflow" in page.content()
    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/?q=gpt-summarize")
    assert page.locator("#result_list tbody tr").count() == 1
    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/?q=ops/nightly")
    assert page.locator("#result_list tbody tr").count() == 4


def test_the_receipts_list_pages_newer_and_older_and_searches_by_prefix(
    page, live_server, demo, monkeypatch
) -> None:
    """Pages by seq without a count: "Older" and "Newer" move a page, the bar says which
    receipts of how many; a search finds a tool by the start of its name. At 1366 px."""
    from apps.receipts.admin import MirrorEntryAdmin

    monkeypatch.setattr(MirrorEntryAdmin, "list_per_page", 2)
    sign_in(page, live_server, "viewer")
    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/")
    bar = page.locator("#keyset-pagination")
    assert "Receipts #5 to #4 of 5 in acme" in bar.inner_text()
    assert bar.locator("a[rel=prev]").count() == 0  # the newest page has nothing newer
    bar.locator("a[rel=next]", has_text="Older").click()
    page.wait_for_url("**after=4**")
    assert "Receipts #3 to #2 of 5 in acme" in page.locator("#keyset-pagination").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.locator("#keyset-pagination a[rel=next]").click()
    page.wait_for_url("**after=2**")
    assert page.locator("#result_list tbody tr").count() == 1
    assert page.locator("#keyset-pagination a[rel=next]").count() == 0  # the oldest page
    page.locator("#keyset-pagination a[rel=prev]", has_text="Newer").click()
    page.wait_for_url("**before=1**")
    assert "Receipts #3 to #2" in page.locator("#keyset-pagination").inner_text()
    page.fill("#searchbar", "gpt-sum")
    page.press("#searchbar", "Enter")
    page.wait_for_url("**q=gpt-sum**")
    assert page.locator("#result_list tbody tr").count() == 1
    assert "llm_call gpt-summarize" in page.locator("#result_list").inner_text()
    assert "after=" not in page.url  # a new search starts at the newest page


def test_a_receipt_links_to_its_session_neighbours_predecessor_and_approval(
    page, live_server, demo
) -> None:
    sign_in(page, live_server, "viewer")
    middle = entry(demo["session"][1])
    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/{middle.pk}/change/")
    links = page.locator("ul.receipt-links")
    text = links.inner_text()
    assert "Chain predecessor: #1" in text
    assert "Session previous: #1" in text
    assert "Session next: #3" in text
    assert "change" not in page.locator("h1").first.inner_text().lower()
    links.locator("a", has_text="#3").first.click()
    page.wait_for_url(f"**/admin/receipts/mirrorentry/{entry(demo['session'][2]).pk}/change/")
    suspended = entry(demo["suspended"])
    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/{suspended.pk}/change/")
    page.locator("ul.receipt-links a", has_text=demo["pending"].approval_id).click()
    page.wait_for_url(f"**/admin/approvals/approval/{demo['pending'].pk}/change/")


@pytest.mark.parametrize("role", ROLES)
def test_the_approval_queue_links_receipts_signing_pages_and_keeps_decided_ones(
    page, live_server, demo, role
) -> None:
    sign_in(page, live_server, role)
    page.goto(f"{live_server.url}/approvals")
    pending = demo["pending"]
    row = page.locator("#result_list tbody tr", has_text=pending.approval_id)
    assert row.count() == 1
    assert "votes (0 of 1)" in row.inner_text()
    assert row.locator("a", has_text="receipt #5").count() == 1
    assert row.locator(f"a[href='/approve/{pending.approval_id}']").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    assert page.evaluate(
        "document.querySelector('#result_list').parentElement.scrollWidth"
        " <= document.querySelector('#result_list').parentElement.clientWidth + 1"
    )
    decided = page.locator("#recently-decided")
    assert demo["decided"].approval_id in decided.inner_text()
    assert "rejected" in decided.inner_text()
    page.goto(f"{live_server.url}/admin/approvals/approval/{pending.pk}/change/")
    text = page.locator("#content").inner_text()
    assert "Alice's laptop (alice)" in text  # the roster names the key
    assert "Change approval" not in text
    assert "{}" not in text  # the context is text, not JSON
    page.locator(f"#content a[href='/approve/{pending.approval_id}']").first.click()
    page.wait_for_url(f"**/approve/{pending.approval_id}")
    assert "Countersign" in page.title()


def test_an_approval_waiting_for_approver_keys_says_so(page, live_server, cast, push) -> None:
    content = suspended_receipt(Agent())["content"]
    approval_open(org=cast.acme, action_hash=content["action_hash"], suspended_content=content)
    sign_in(page, live_server, "auditor")
    page.goto(f"{live_server.url}/approvals")
    assert "approver keys (0 eligible, 1 needed)" in page.locator("#result_list").inner_text()


@pytest.mark.parametrize("role", ROLES)
def test_the_dashboard_counters_link_their_lists_and_sparklines_carry_dates(
    page, live_server, cast, demo, role
) -> None:
    sign_in(page, live_server, role)
    assert page.url.endswith(f"/admin/tenancy/org/{cast.acme.pk}/dashboard/")
    first, last = (timezone.now().date() - timedelta(days=29)), timezone.now().date()
    span = f"{first:%Y-%m-%d} to {last:%Y-%m-%d}, one point a day"
    assert page.locator(f"svg title:text-is('{span}')").count() >= 1
    assert f"{last:%b %d}" in page.locator(".spark-dates").first.inner_text()
    assert page.locator("#empty-receipts").count() == 0
    page.locator(".card", has_text="Receipts mirrored").locator("a").click()
    page.wait_for_url("**/admin/receipts/mirrorentry/?org=*")
    assert page.locator("#result_list tbody tr").count() == 5
    page.go_back()
    page.locator(".card", has_text="Approvals pending").locator("a").click()
    page.wait_for_url("**/admin/approvals/approval/?*")
    assert "status__exact=pending" in page.url
    assert demo["pending"].approval_id in page.locator("#result_list").inner_text()


def test_a_fresh_orgs_dashboard_says_what_to_do_next(page, live_server, db) -> None:
    fresh = org_create(slug="fresh", name="Fresh", plan=Plan.FREE)
    membership_add(org=fresh, username="fresh-owner", role=Role.OWNER, password="pw-owner")
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "fresh-owner")
    page.fill("#id_password", "pw-owner")
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/dashboard/")
    assert "No receipts yet" in page.locator("#empty-receipts").inner_text()
    assert "No approver keys yet" in page.locator("#empty-approver-keys").inner_text()
    assert "No policy deployed yet" in page.locator("#content").inner_text()


def test_the_demo_make_run_seeds_fills_every_screen(page, live_server, tmp_path) -> None:
    """Signed in with the login ``make run`` prints, every screen shows the seeded demo."""
    demo = demo_bootstrap(slug="demo", username="demo", state_dir=tmp_path)
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", demo.username)
    page.fill("#id_password", demo.password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url("**/dashboard/")
    assert page.locator("#empty-receipts").count() == 0
    assert page.locator("#empty-approver-keys").count() == 0
    assert "No policy deployed yet" not in page.locator("#content").inner_text()

    page.goto(f"{live_server.url}/admin/receipts/mirrorentry/")
    listed = page.locator("#result_list").inner_text()
    for kind in ("tool_call", "llm_call", "payment", "redact", "require_approval"):
        assert kind in listed, kind
    assert (
        page.locator("#result_list tbody tr").count()
        == MirrorEntry.objects.filter(org=demo.org).count()
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH

    pending = Approval.objects.get(org=demo.org, status="pending")
    page.goto(f"{live_server.url}/approvals")
    row = page.locator("#result_list tbody tr", has_text=pending.approval_id)
    assert "votes (0 of 1)" in row.inner_text()
    row.locator(f"a[href='/approve/{pending.approval_id}']").click()
    page.wait_for_selector("body[data-ready]")  # rendered; "no" until this browser holds a key
    assert "payment" in page.inner_text("#action")
    roster = page.inner_text("#approval")
    assert "Demo approver (demo only) (ak_demo)" in roster
    assert demo.approver_public_key not in roster

    page.goto(f"{live_server.url}/admin/policy/policyversion/")
    assert page.locator("#result_list tbody tr").count() == 1
