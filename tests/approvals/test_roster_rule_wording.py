"""Every page, the README and the documentation say the same roster rule (server.md §6):
the one sentence of ``ROSTER_RULE``, and none of the claims it replaced."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from django.test import Client

from apps.approvals.models import ROSTER_RULE

ROOT = Path(__file__).resolve().parents[2]
# Where the rule is written out: the README and the pages about approvers.
SAYS_THE_RULE = ["README.md", "docs/approvals.md", "docs/console.md"]
# What pages and documents said before, which the service does not do.
WRONG_CLAIMS = [
    "registered before an approval opens",
    "registered <em>before</em> an approval opens",
    "the roster is frozen at opening",
    "ask an operator to run",
]


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("name", SAYS_THE_RULE)
def test_the_readme_and_docs_state_the_roster_rule_verbatim(name: str) -> None:
    assert ROSTER_RULE in flat((ROOT / name).read_text())


def test_no_page_or_document_repeats_a_replaced_claim() -> None:
    texts = [
        *ROOT.glob("docs/*.md"),
        ROOT / "README.md",
        *ROOT.glob("apps/**/templates/**/*.html"),
        *ROOT.glob("templates/**/*.html"),
        *ROOT.glob("apps/console/static/console/*.js"),
    ]
    for path in texts:
        text = flat(path.read_text()).lower()
        for claim in WRONG_CLAIMS:
            assert claim.lower() not in text, (path, claim)


@pytest.mark.django_db
def test_the_devices_page_states_the_roster_rule() -> None:
    html = unescape(Client().get("/approve/").content.decode())
    assert ROSTER_RULE in flat(html)
