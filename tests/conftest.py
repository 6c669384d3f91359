"""The fixed cast every test module can use: two orgs, their keys and console members."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.tenancy import key_cache
from apps.tenancy.models import DEFAULT_SCOPES, Org, Plan, Role, Scope
from apps.tenancy.services import IssuedKey, api_key_issue, membership_add, org_create

# The team-path profile's callers (acme, globex, anonymous) and its TEAMPATH marks, used by
# the team-path modules in tests/receipts, tests/approvals, tests/policy and tests/api; and
# the OpenID Connect provider the single sign-on tests start (tests/oidc_provider); the
# S3-compatible server the archive's bucket tests start (tests/s3_server.py).
pytest_plugins = [
    "tests.teampath_fixtures", "tests.oidc_provider.running", "tests.s3_server", "tests.scale",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _forget_authenticated_keys() -> Iterator[None]:
    """Each test starts with no key remembered by this worker (``key_cache``): a test's
    database rollback sends no signal."""
    key_cache.forget_all()
    yield
    key_cache.forget_all()


@dataclass
class Cast:
    acme: Org
    globex: Org
    acme_key: IssuedKey  # the default SDK scopes
    acme_policy_only_key: IssuedKey  # policy:read only
    globex_key: IssuedKey


@pytest.fixture
def cast(db: None) -> Cast:
    acme = org_create(slug="acme", name="Acme", plan=Plan.PRO)
    globex = org_create(slug="globex", name="Globex", plan=Plan.FREE)
    for role in Role:
        membership_add(org=acme, username=f"acme-{role.value}", role=role, password="pw-" + role)
    return Cast(
        acme=acme,
        globex=globex,
        acme_key=api_key_issue(org=acme, scopes=DEFAULT_SCOPES, label="agent"),
        acme_policy_only_key=api_key_issue(org=acme, scopes=[Scope.POLICY_READ], label="ro"),
        globex_key=api_key_issue(org=globex, scopes=DEFAULT_SCOPES, label="agent"),
    )


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def push(cast: Cast, api_client: APIClient) -> Any:
    """Pushes receipts to POST /v1/receipts with acme's key (see tests/receipts/conftest)."""
    from tests.receipts.conftest import Pusher

    return Pusher(api_client, cast.acme_key.secret)


@pytest.fixture
def globex_push(cast: Cast) -> Any:
    from tests.receipts.conftest import Pusher

    return Pusher(APIClient(), cast.globex_key.secret)


@pytest.fixture
def dashboard(cast: Cast) -> Any:
    """``dashboard("manager")``: an APIClient carrying acme-manager's session JWT."""
    from django.contrib.auth import get_user_model

    from apps.tenancy.console_tokens import console_tokens_issue
    from apps.tenancy.org_context import activate_default

    def client_for(role: str, org_slug: str = "acme", username: str | None = None) -> APIClient:
        user = get_user_model().objects.get(username=username or f"{org_slug}-{role}")
        tokens = console_tokens_issue(user=user, org_slug=org_slug)
        activate_default()  # issuing resolved the org context; test code sees every org
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.access}")
        return client

    return client_for


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``postgres`` need row locks and real concurrency: CI runs them."""
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL); CI runs it")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


# --- Row-level security: the suite runs as the application role ------------------------
#
# When MIGRATION_DATABASE_URL names another role than DATABASE_URL (CI does), the test
# database is created and migrated as that owner role, exactly as `manage.py migrate`
# would, and every test then connects as the ordinary application role that row-level
# security applies to. Locally, with one role, nothing is swapped.

_CREDENTIALS = ("USER", "PASSWORD", "HOST", "PORT")


def _owner_differs() -> bool:
    from django.conf import settings

    default = settings.DATABASES["default"]
    owner = settings.MIGRATION_DATABASE
    return default["ENGINE"].endswith("postgresql") and owner.get("USER") not in (
        None,
        "",
        default.get("USER"),
    )


_app_credentials: dict[str, object] = {}


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    from django.conf import settings
    from django.db import connections

    if not _owner_differs():
        return
    default = connections["default"]
    _app_credentials.update({name: default.settings_dict.get(name) for name in _CREDENTIALS})
    default.close()
    default.settings_dict.update(
        {name: settings.MIGRATION_DATABASE.get(name) for name in _CREDENTIALS}
    )


@pytest.fixture(scope="session", autouse=True)
def _connect_as_application_role(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    from django.db import connections

    if not _app_credentials:
        yield
        return
    default = connections["default"]
    owner_credentials = {name: default.settings_dict.get(name) for name in _CREDENTIALS}
    with django_db_blocker.unblock():
        from apps.common.management.commands.migrate import grant_application_role

        role = str(_app_credentials["USER"])
        grant_application_role(default, role)
        with default.cursor() as cursor:  # pytest-django empties tables between some tests
            cursor.execute(f"GRANT TRUNCATE ON ALL TABLES IN SCHEMA public TO {role}")
        default.close()
        default.settings_dict.update(_app_credentials)
    yield
    with django_db_blocker.unblock():
        default.close()
        default.settings_dict.update(owner_credentials)
