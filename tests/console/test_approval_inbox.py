"""The approval inbox: the pending queue (``/approvals``, the link the SDK prints) says what
each approval asks and who is on its roster, with a "Review and sign" button, and reads at
1366 x 768 without sideways scrolling; the approval's page has the button at its top."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus
from typing import Any

import pytest
from django.utils import timezone

from apps.approvals.services import approval_open, approver_key_register
from tests.approvals.conftest import Approver
from tests.console.test_approve_page import RULE, login, stored_content, suspended_receipt
from tests.receipts.factories import Agent

pytestmark = pytest.mark.django_db(transaction=True)

WIDTH, HEIGHT = 1366, 768


@pytest.fixture
def payment(cast, push) -> Any:
    from django.contrib.auth import get_user_model

    receipt = suspended_receipt(Agent(), note="wire to supplier")
    assert push(receipt).status_code == HTTPStatus.CREATED
    approver_key_register(
        org=cast.acme, public_key=Approver("alice").public, key_id="alice",
        label="work laptop", member=get_user_model().objects.get(username="acme-auditor"),
    )  # fmt: skip
    content = stored_content(receipt)
    approval = approval_open(
        org=cast.acme, action_hash=content["action_hash"], suspended_content=content,
        workflow="ops/nightly",
    ).approval  # fmt: skip
    # As if the receipt had signed an expiry 90 minutes away.
    approval.expires_at = timezone.now() + timedelta(minutes=90)
    approval.save(update_fields=["expires_at"])
    return approval


def fits(page: Any) -> None:
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
    assert page.evaluate(
        "(() => { const box = document.querySelector('#result_list').parentElement;"
        " return box.scrollWidth <= box.clientWidth; })()"
    )


def test_an_inbox_row_is_read_at_1366_px_and_opens_the_signing_page(
    page, live_server, payment
) -> None:
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    login(page, live_server, "acme-viewer")
    page.goto(f"{live_server.url}/approvals")
    headers = " | ".join(page.locator("#result_list thead th").all_inner_texts()).lower()
    for column in ("what is asked", "rule and condition", "agent and workflow", "roster",
                   "time left"):  # fmt: skip
        assert column in headers, headers
    row = page.locator("#result_list tbody tr", has_text=payment.approval_id)
    text = row.inner_text()
    for shown in ("tool_call search", "amount: 125000", "payee: ACME GmbH", RULE,
                  "amount_minor gt 100000", "ops/nightly", "votes (0 of 1)",
                  "acme-auditor (work laptop): not voted", "min left"):  # fmt: skip
        assert shown in text, (shown, text)
    assert "1 h 29 min left" in text or "1 h 30 min left" in text
    fits(page)
    button = row.locator("a.review-sign", has_text="Review and sign")
    assert button.is_visible()
    box = button.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= WIDTH
    button.click()
    page.wait_for_url(f"**/approve/{payment.approval_id}")
    page.wait_for_selector("body[data-ready]")
    assert "ACME GmbH" in page.inner_text("#fields")


def test_the_approval_page_has_review_and_sign_at_its_top(page, live_server, payment) -> None:
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    login(page, live_server, "acme-auditor")
    page.goto(f"{live_server.url}/admin/approvals/approval/{payment.pk}/change/")
    button = page.locator("#review-and-sign")
    assert button.inner_text().strip() == "Review and sign"
    box = button.bounding_box()
    assert box is not None
    assert box["y"] < HEIGHT
    content = page.locator("#content").inner_text()
    for shown in ("amount: 125000", "payee: ACME GmbH", "amount_minor gt 100000", "min left"):
        assert shown in content, shown
    assert page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
    button.click()
    page.wait_for_url(f"**/approve/{payment.approval_id}")
