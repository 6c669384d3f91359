"""api_key_rotate: the service behind the console's rotate action."""

from __future__ import annotations

import pytest

from apps.common.errors import InvalidInput, NotFound
from apps.tenancy.models import ApiKey
from apps.tenancy.org_context import activate_default
from apps.tenancy.services import api_key_authenticate, api_key_revoke, api_key_rotate


def test_rotating_issues_the_same_key_anew_and_revokes_the_old(cast) -> None:
    old = cast.acme_policy_only_key.api_key
    issued = api_key_rotate(prefix=old.prefix)
    new = issued.api_key
    assert (new.org_id, new.label, new.scopes) == (old.org_id, old.label, old.scopes)
    assert new.prefix != old.prefix
    assert ApiKey.objects.get(pk=old.pk).revoked_at is not None
    assert api_key_authenticate(presented=cast.acme_policy_only_key.secret) is None
    assert api_key_authenticate(presented=issued.secret).pk == new.pk
    activate_default()


def test_a_revoked_or_unknown_key_is_not_rotated(cast) -> None:
    api_key_revoke(prefix=cast.globex_key.api_key.prefix)
    with pytest.raises(InvalidInput):
        api_key_rotate(prefix=cast.globex_key.api_key.prefix)
    with pytest.raises(NotFound):
        api_key_rotate(prefix="hk_000000000000")
    assert ApiKey.objects.filter(org=cast.globex).count() == 1
