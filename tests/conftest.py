"""The fixed cast every test module can use: two orgs, their keys and console members."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.db import connection
from rest_framework.test import APIClient

from apps.tenancy.models import DEFAULT_SCOPES, Org, Plan, Role, Scope
from apps.tenancy.services import IssuedKey, api_key_issue, membership_add, org_create


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
