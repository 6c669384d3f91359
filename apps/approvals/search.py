"""The console's search of an org's approvals, through indexes where a term names one.

What a search term finds, newest first:

- the approval with that approval id (the unique index on ``approval_id``);
- the approval of that full action hash (the (org, action_hash) unique index), or those of
  that suspend ticket (the (org, ticket_hash) index);
- the approvals of the session with that id (the (org, session_id, session_seq) index);
- otherwise, the approvals whose rule id or workflow starts with the term: no index holds
  those, so the list looks for them through a window of the org's newest approvals
  (``apps.tenancy.admin_paging``), never through all of them.

Each exact match is a *branch* of the page: the page reads at most a page of rows from
each, whatever the number of the org's approvals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL

from apps.approvals.models import Approval
from apps.approvals.selectors import TICKETED
from apps.receipts.columns import indexed_text

# The session index's condition, written out for the same reason as ``TICKETED``: a plan
# made for any values cannot prove ``session_id <> ''`` from ``session_id = $2``.
SESSIONED = RawSQL(  # noqa: S611 (constant text: the model's own table and column)
    f'"{Approval._meta.db_table}"."session_id" <> \'\'', (), output_field=BooleanField()
)
_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass
class ApprovalSearch:
    """The branches an exact term's page merges; none when the term is looked for by the
    start of a rule id or workflow, through the window."""

    branches: list[QuerySet[Approval]] = field(default_factory=list)

    @property
    def windowed(self) -> bool:
        return not self.branches


def approval_search(*, queryset: QuerySet[Approval], org_id: int, term: str) -> ApprovalSearch:
    """The branches that find ``term`` exactly in the org's approvals (module docstring):
    each tried by its index, and only those that find something kept."""
    term = term.strip()
    rows = queryset.filter(org_id=org_id)
    exact = [rows.filter(approval_id=term)]
    if _HASH.fullmatch(term):
        exact += [rows.filter(action_hash=term), rows.filter(TICKETED, ticket_hash=term)]
    exact.append(rows.filter(SESSIONED, session_id=indexed_text(term)))
    return ApprovalSearch(branches=[branch for branch in exact if branch.exists()])


def approval_prefix_match(term: str) -> Q:
    """Approvals whose rule id or workflow starts with ``term`` (looked for in the window)."""
    term = term.strip()
    return Q(rule_id__startswith=term) | Q(workflow__startswith=term)
