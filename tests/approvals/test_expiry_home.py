"""The expiry rule has one home: ``apps/approvals/models.py`` (``Approval.takes_votes_at``,
``outcome_at``, ``expiry_outcome`` and the sweep's ``overdue_at``). Anywhere else in
``apps/``, ordering an approval's ``expires_at`` against a time (``now > approval.expires_at``)
or filtering on it by order (``expires_at__lt=now``) computes the rule a second time, and
this test names the line.

Precise on purpose: only the member named exactly ``expires_at`` counts (a webhook's
``previous_secret_expires_at`` or a console token's ``access_expires_at`` is another rule),
and only ordering comparisons (``is None`` asks whether there is an expiry, not whether it
passed).
"""

from __future__ import annotations

import ast
from pathlib import Path

APPS = Path(__file__).resolve().parents[2] / "apps"
HOME = APPS / "approvals" / "models.py"
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
ORDERED_LOOKUPS = {f"expires_at__{lookup}" for lookup in ("lt", "lte", "gt", "gte", "range")}


def _names_expiry(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "expires_at"
    if isinstance(node, ast.Name):
        return node.id == "expires_at"
    return False


def expiry_rule_sites(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that compare an ``expires_at`` by order, in Python or SQL."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, ORDERING) for op in node.ops):
            if any(_names_expiry(operand) for operand in [node.left, *node.comparators]):
                lines.append(node.lineno)
        elif isinstance(node, ast.keyword) and node.arg in ORDERED_LOOKUPS:
            lines.append(node.value.lineno)
    return sorted(lines)


def test_the_detector_sees_each_spelling_and_nothing_else():
    caught = ast.parse(
        "a = now > approval.expires_at\n"
        "b = approval.expires_at <= now\n"
        "c = Approval.objects.filter(expires_at__lt=now)\n"
        "d = now < expires_at\n"
    )
    assert expiry_rule_sites(caught) == [1, 2, 3, 4]
    ignored = ast.parse(
        "a = approval.expires_at is None\n"
        "b = endpoint.previous_secret_expires_at > now\n"
        "c = tokens.access_expires_at < now\n"
        "d = Approval.objects.filter(expires_at=None)\n"
        "e = {'expires_at': approval.expires_at}\n"
    )
    assert expiry_rule_sites(ignored) == []


def test_the_expiry_rule_is_computed_only_on_the_approval_model():
    elsewhere = []
    for path in sorted(APPS.rglob("*.py")):
        if path == HOME or "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        elsewhere += [f"{path.relative_to(APPS.parent)}:{line}" for line in expiry_rule_sites(tree)]
    assert elsewhere == [], (
        "the approval expiry rule is computed outside apps/approvals/models.py: ask "
        "Approval.takes_votes_at / outcome_at / expired_unsettled_at / overdue_at instead"
    )


def test_its_home_holds_the_rule():
    assert expiry_rule_sites(ast.parse(HOME.read_text()))
