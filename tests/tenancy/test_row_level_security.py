"""Row-level security on PostgreSQL: a query in one org's context sees no other org's rows."""

from __future__ import annotations

import os

import pytest
from django.db import DatabaseError, connection, transaction

from apps.policy.models import PolicyVersion
from apps.policy.services import policy_deploy
from apps.receipts.models import MirrorEntry
from apps.tenancy.checks import check_application_role, role_problems
from apps.tenancy.models import ApiKey, Membership, Org
from apps.tenancy.org_context import (
    activate_all_orgs,
    activate_orgs,
    lookup_api_key,
    org_scope,
)
from apps.tenancy.services import api_key_revoke
from tests.policy.model_factories import PolicyVersionFactory
from tests.receipts.conftest import Pusher
from tests.receipts.factories import Agent

pytestmark = pytest.mark.postgres

PROBE_ROLE = "mirror_rls_probe"


@pytest.fixture
def subject_to_rls(db: None) -> None:
    """Run the test as a role row-level security applies to.

    CI already connects as the ordinary application role. A developer's superuser
    connection switches, for this test's transaction only, to a probe role.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        (exempt,) = cursor.fetchone()
        if exempt:
            cursor.execute(
                "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "  # noqa: S608
                f"'{PROBE_ROLE}') THEN CREATE ROLE {PROBE_ROLE} NOLOGIN; END IF; END $$"
            )
            cursor.execute(
                f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {PROBE_ROLE}"
            )
            cursor.execute(f"SET LOCAL ROLE {PROBE_ROLE}")


@pytest.fixture
def two_orgs_with_rows(cast, subject_to_rls) -> None:
    from rest_framework.test import APIClient

    for org_key in (cast.acme_key, cast.globex_key):
        pusher = Pusher(APIClient(), org_key.secret)
        for _ in range(2):
            assert pusher(Agent().receipt()).status_code == 201
    policy_deploy(org=cast.acme, toml="")
    policy_deploy(org=cast.globex, toml="")


def test_a_query_without_an_org_filter_returns_only_the_context_orgs_rows(
    cast, two_orgs_with_rows
) -> None:
    with org_scope([cast.acme.pk]):
        assert {entry.org_id for entry in MirrorEntry.objects.all()} == {cast.acme.pk}
        assert MirrorEntry.objects.filter(org=cast.globex).count() == 0
        assert list(Org.objects.values_list("slug", flat=True)) == ["acme"]
        assert set(ApiKey.objects.values_list("org_id", flat=True)) == {cast.acme.pk}
        assert set(Membership.objects.values_list("org_id", flat=True)) == {cast.acme.pk}
        assert set(PolicyVersion.objects.values_list("org_id", flat=True)) == {cast.acme.pk}


def test_no_org_context_sees_no_rows_at_all(cast, two_orgs_with_rows) -> None:
    with org_scope([]):
        assert MirrorEntry.objects.count() == 0
        assert Org.objects.count() == 0
        assert ApiKey.objects.count() == 0


def test_the_all_orgs_context_sees_every_org(cast, two_orgs_with_rows) -> None:
    activate_all_orgs()
    assert MirrorEntry.objects.count() == 4
    assert set(Org.objects.values_list("slug", flat=True)) == {"acme", "globex"}


def test_a_write_into_another_orgs_rows_is_refused(cast, two_orgs_with_rows) -> None:
    activate_orgs([cast.acme.pk])
    try:
        with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
            PolicyVersionFactory(org=cast.globex)
        assert MirrorEntry.objects.filter(org=cast.globex).update(superseded_by="x") == 0
    finally:
        activate_all_orgs()


def test_every_table_with_an_org_column_has_row_level_security(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.relrowsecurity FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r' AND EXISTS ("
            "  SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'org_id'"
            "  AND NOT a.attisdropped) OR c.relname = 'tenancy_org'"
        )
        tables = dict(cursor.fetchall())
    assert "receipts_mirrorentry" in tables
    assert [name for name, secured in tables.items() if not secured] == []


def test_the_role_check_flags_a_superuser_and_bypassrls() -> None:
    problems = role_problems(is_superuser=True, bypasses_rls=True, role="postgres")
    assert [problem.id for problem in problems] == ["mirror.E101", "mirror.E102"]
    assert role_problems(is_superuser=False, bypasses_rls=False, role="mirror_app") == []


def test_the_role_check_reads_the_connected_role(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = session_user")
        (is_superuser,) = cursor.fetchone()
    ids = [problem.id for problem in check_application_role(databases=["default"])]
    assert ("mirror.E101" in ids) == is_superuser
    if os.environ.get("CI"):
        # CI runs the whole suite through the ordinary application role.
        assert ids == []


def test_the_key_resolver_opens_the_keys_org_only_for_its_digest(cast, two_orgs_with_rows) -> None:
    key = ApiKey.objects.get(prefix=cast.acme_key.api_key.prefix)
    activate_orgs([])
    try:
        # The row comes back either way: the caller compares the digest in constant time.
        assert lookup_api_key(prefix=key.prefix, digest="0" * 64) is not None
        assert MirrorEntry.objects.count() == 0
        assert lookup_api_key(prefix=key.prefix, digest=key.digest) is not None
        assert {entry.org_id for entry in MirrorEntry.objects.all()} == {cast.acme.pk}
    finally:
        activate_all_orgs()


def test_a_revoked_key_opens_no_org(cast, two_orgs_with_rows) -> None:
    key = api_key_revoke(prefix=cast.acme_key.api_key.prefix)
    activate_orgs([])
    try:
        assert lookup_api_key(prefix=key.prefix, digest=key.digest) is not None
        assert MirrorEntry.objects.count() == 0
    finally:
        activate_all_orgs()


@pytest.mark.parametrize(("default", "visible"), [("none", 0), ("all", 4)])
def test_a_finished_requests_org_context_never_reaches_a_later_statement(
    cast, two_orgs_with_rows, settings, default, visible
) -> None:
    """The context expires with the request; the next statement runs in the default."""
    from rest_framework.test import APIClient

    settings.ORG_CONTEXT_DEFAULT = default
    try:
        pusher = Pusher(APIClient(), cast.acme_key.secret)
        assert pusher(Agent().receipt()).status_code == 201
        assert MirrorEntry.objects.count() == visible + (1 if default == "all" else 0)
        assert Org.objects.count() == (2 if default == "all" else 0)
    finally:
        activate_all_orgs()
