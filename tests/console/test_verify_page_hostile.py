"""The browser verifier (/verify) gives the Python verifier's verdict on hostile receipts:
NUL outside and inside ``action.fields`` (server.md §1), nesting past the limit, numbers no
double or typed integer holds. Skipped without Chromium, like the page's other
browser tests."""

from __future__ import annotations

from typing import Any

from apps.receipts.verifier import verify_receipt
from tests.console.test_verify_page import in_browser
from tests.receipts.factories import Agent, as_text
from tests.receipts.test_nul_in_receipts import ACCEPTED, REFUSED
from tests.receipts.verifier.test_hostile_text import HOSTILE_CASES


def test_the_browser_agrees_on_hostile_receipts(verifier: Any) -> None:
    agent = Agent()
    texts = [as_text(case.receipt(agent)) for case in REFUSED + ACCEPTED]
    texts += [text for case in HOSTILE_CASES if isinstance(text := case.text(), str)]
    verdicts = in_browser(verifier, "mirrorVerify", texts)
    for text, verdict in zip(texts, verdicts, strict=True):
        expected = verify_receipt(text)
        assert (verdict["kind"], verdict.get("detail")) == (expected.kind, expected.detail)
