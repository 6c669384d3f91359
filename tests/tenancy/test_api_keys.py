import pytest
from django.db import connection

from apps.common.errors import InvalidInput, NotFound
from apps.tenancy.models import ApiKey, Scope
from apps.tenancy.services import (
    KEY_PREFIX_LENGTH,
    api_key_authenticate,
    api_key_issue,
    api_key_revoke,
)

pytestmark = pytest.mark.django_db


def test_an_issued_key_starts_with_its_prefix(cast):
    issued = cast.acme_key
    assert issued.secret.startswith(issued.api_key.prefix)
    assert len(issued.api_key.prefix) == KEY_PREFIX_LENGTH


def test_the_secret_never_reaches_the_database_in_clear(cast):
    secret = cast.acme_key.secret
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tenancy_apikey")
        rows = cursor.fetchall()
    dumped = repr(rows)
    assert secret not in dumped
    assert secret[KEY_PREFIX_LENGTH + 1 :] not in dumped


def test_two_issued_keys_differ(cast):
    again = api_key_issue(org=cast.acme, scopes=[Scope.RECEIPTS_WRITE])
    assert again.secret != cast.acme_key.secret
    assert again.api_key.prefix != cast.acme_key.api_key.prefix


def test_it_authenticates_the_exact_secret_only(cast):
    assert api_key_authenticate(presented=cast.acme_key.secret) == cast.acme_key.api_key
    assert api_key_authenticate(presented=cast.acme_key.secret + "x") is None
    assert api_key_authenticate(presented=cast.acme_key.api_key.prefix) is None


def test_a_revoked_key_no_longer_authenticates(cast):
    revoked = api_key_revoke(prefix=cast.acme_key.api_key.prefix)
    assert revoked.is_revoked
    assert api_key_authenticate(presented=cast.acme_key.secret) is None


def test_revoking_twice_keeps_the_first_revocation_time(cast):
    first = api_key_revoke(prefix=cast.acme_key.api_key.prefix).revoked_at
    second = api_key_revoke(prefix=cast.acme_key.api_key.prefix).revoked_at
    assert first == second


def test_revoking_an_unknown_prefix_is_not_found(cast):
    with pytest.raises(NotFound):
        api_key_revoke(prefix="hk_ffffffffffff")


def test_it_refuses_unknown_scopes(cast):
    with pytest.raises(InvalidInput, match="unknown scope"):
        api_key_issue(org=cast.acme, scopes=["receipts:delete"])
    assert ApiKey.objects.filter(org=cast.acme).count() == 2


def test_it_refuses_a_key_without_scopes(cast):
    with pytest.raises(InvalidInput, match="at least one scope"):
        api_key_issue(org=cast.acme, scopes=[" "])


def test_approvers_write_is_never_a_default_scope(cast):
    assert Scope.APPROVERS_WRITE not in cast.acme_key.api_key.scopes
