"""SCIM filters (``userName eq "…"``, what identity providers ask before creating someone)
on the org's provisioned people and groups, as django-scim2's SQL filter queries."""

from __future__ import annotations

from typing import Any

from django_scim.filters import FilterQuery

from apps.tenancy.models import ScimGroup, ScimUser


def _scim_user_model() -> type[ScimUser]:
    return ScimUser


def _scim_group_model() -> type[ScimGroup]:
    return ScimGroup


class _OrgFilterQuery(FilterQuery):
    @classmethod
    def get_extras(cls, q: Any, request: Any = None) -> tuple[str, list[Any]]:
        # Row-level security limits the rows to the token's org already; said here too.
        return f" AND {cls.table_name()}.org_id = %s", [request.scim_token.org_id]


class ScimUserFilterQuery(_OrgFilterQuery):
    model_getter = _scim_user_model
    attr_map = {
        ("userName", None, None): "user_name",
        ("externalId", None, None): "external_id",
        ("active", None, None): "active",
        ("name", "givenName", None): "given_name",
        ("name", "familyName", None): "family_name",
    }


class ScimGroupFilterQuery(_OrgFilterQuery):
    model_getter = _scim_group_model
    attr_map = {
        ("displayName", None, None): "display_name",
        ("externalId", None, None): "external_id",
    }
