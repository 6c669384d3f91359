"""Org trees are org-scoped: one org's context sees none of another's nodes."""

from __future__ import annotations

import pytest

from apps.tenancy.org_context import org_scope
from apps.transparency.models import OrgLog, OrgTreeNode
from apps.transparency.services import org_trees_extend
from tests.transparency.factories import mirror

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_an_org_context_sees_only_its_own_tree(cast) -> None:
    mirror(cast.acme, ["aa" * 32, "bb" * 32])
    mirror(cast.globex, ["cc" * 32])
    org_trees_extend()
    with org_scope([cast.globex.pk]):
        assert set(OrgTreeNode.objects.values_list("org_id", flat=True)) == {cast.globex.pk}
        assert list(OrgLog.objects.values_list("org_id", flat=True)) == [cast.globex.pk]
    assert OrgTreeNode.objects.filter(org=cast.acme).count() == 3
