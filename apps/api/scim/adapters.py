"""django-scim2 adapters: the org's provisioned people (SCIM Users) and groups (SCIM Groups)
as SCIM resources, and SCIM writes (POST, PUT, PATCH, DELETE) as calls of the provisioning
services. A service's refusal is a SCIM error with its status, never a 500."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django_scim import constants, exceptions
from django_scim.adapters import SCIMMixin

from apps.api.scim.filters import ScimGroupFilterQuery, ScimUserFilterQuery
from apps.approvals.services.members import member_provisioning_apply, member_unprovision
from apps.common.errors import DomainError
from apps.tenancy.models import ScimGroup, ScimGroupMember, ScimUser
from apps.tenancy.services.scim import (
    ScimConflict,
    scim_actor,
    scim_group_delete,
    scim_group_save,
    scim_user_create,
    scim_user_update,
)


@contextmanager
def _scim_errors() -> Iterator[None]:
    try:
        yield
    except ScimConflict as conflict:
        raise exceptions.IntegrityError(conflict.message, scim_type="uniqueness") from None
    except DomainError as refusal:
        status = 400 if refusal.status == 422 else int(refusal.status)
        raise exceptions.SCIMException(refusal.message, status=status) from None


def org_filter_kwargs_getter(model: Any) -> Callable[..., dict[str, Any]]:
    """django-scim2's extra filter: only the token's org's resources."""

    def org_only(request: HttpRequest, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if args:  # one resource, by its id: a malformed id is no resource (not a 500)
            try:
                uuid.UUID(str(args[0]))
            except ValueError:
                raise exceptions.NotFoundError(args[0]) from None
        return {"org_id": request.scim_token.org_id}  # type: ignore[attr-defined]

    return org_only


def _apply(request: HttpRequest, scim_users: list[ScimUser]) -> None:
    actor = scim_actor(request.scim_token)  # type: ignore[attr-defined]
    for scim_user in scim_users:
        member_provisioning_apply(scim_user=scim_user, actor=actor)


def _primary_email(emails: Any) -> str | None:
    if not isinstance(emails, list) or not emails:
        return None
    chosen = next((e for e in emails if isinstance(e, dict) and e.get("primary")), emails[0])
    value = chosen.get("value") if isinstance(chosen, dict) else None
    return value if isinstance(value, str) else None


class _OrgScimAdapter(SCIMMixin):
    """What a User and a Group share: the resource's meta, its ResourceType, and a PATCH whose
    operations are saved as one write."""

    id_field = "scim_id"
    endpoint: str
    description: str
    schema: str

    obj: ScimUser | ScimGroup

    @property
    def meta(self) -> dict[str, Any]:
        return {"resourceType": self.resource_type, "location": self.location,
                "created": self.obj.created_at.isoformat(),
                "lastModified": self.obj.updated_at.isoformat()}  # fmt: skip

    @classmethod
    def resource_type_dict(cls, request: HttpRequest | None = None) -> dict[str, Any]:
        return {"schemas": [constants.SchemaURI.RESOURCE_TYPE], "id": cls.resource_type,
                "name": cls.resource_type, "endpoint": cls.endpoint,
                "description": cls.description, "schema": cls.schema}  # fmt: skip

    def handle_operations(self, operations: list[dict[str, Any]]) -> None:
        super().handle_operations(operations)
        self.save()


class ScimUserAdapter(_OrgScimAdapter):
    url_name = "scim:users"
    resource_type = "User"
    endpoint = "/scim/v2/Users"
    description = "A person the identity provider provisions"
    schema = constants.SchemaURI.USER
    ATTR_MAP = ScimUserFilterQuery.attr_map

    obj: ScimUser

    def __init__(self, obj: ScimUser, request: HttpRequest | None = None) -> None:
        super().__init__(obj, request)
        self.changes: dict[str, Any] = {}

    @property
    def display_name(self) -> str:
        full = f"{self.obj.given_name} {self.obj.family_name}".strip()
        return full or self.obj.user_name

    def to_dict(self) -> dict[str, Any]:
        groups = ScimGroupMember.objects.filter(user=self.obj).select_related("group")
        return {
            "schemas": [constants.SchemaURI.USER],
            "id": self.id,
            "externalId": self.obj.external_id,
            "userName": self.obj.user_name,
            "name": {"givenName": self.obj.given_name, "familyName": self.obj.family_name,
                     "formatted": self.display_name},
            "displayName": self.display_name,
            "emails": [{"value": self.obj.user.email, "primary": True}],
            "active": self.obj.active,
            "groups": [{"value": str(member.group.scim_id), "display": member.group.display_name}
                       for member in groups],
            "meta": self.meta,
        }  # fmt: skip

    def from_dict(self, d: dict[str, Any]) -> None:
        given = d.get("name")
        name: dict[str, Any] = given if isinstance(given, dict) else {}
        for key, value in (("user_name", d.get("userName")), ("external_id", d.get("externalId")),
                           ("given_name", name.get("givenName")),
                           ("family_name", name.get("familyName")),
                           ("email", _primary_email(d.get("emails"))),
                           ("active", d.get("active"))):  # fmt: skip
            if value is not None:
                self.changes[key] = value

    def save(self) -> None:
        request = self.request
        with _scim_errors(), transaction.atomic():
            if self.obj._state.adding:
                self.obj = scim_user_create(
                    org=request.scim_token.org, user_name=self.changes.pop("user_name", ""),
                    actor=scim_actor(request.scim_token), **self.changes,
                )  # fmt: skip
            else:
                scim_user_update(scim_user=self.obj, **self.changes)
            _apply(request, [self.obj])
        self.changes = {}

    def delete(self) -> None:
        with _scim_errors():
            member_unprovision(scim_user=self.obj, actor=scim_actor(self.request.scim_token))

    def _set(self, path: Any, value: Any, operation: dict[str, Any]) -> None:
        if path is None:
            return
        attr, sub_attr, _ = path.first_path
        if attr == "name" and isinstance(value, dict):
            self.from_dict({"name": value})
        elif attr == "emails":
            email = value if isinstance(value, str) else _primary_email(value)
            if email:
                self.changes["email"] = email
        else:
            key = {"active": "active", "userName": "user_name", "externalId": "external_id",
                   "givenName": "given_name", "familyName": "family_name",
                   "name": {"givenName": "given_name", "familyName": "family_name"}.get(
                       sub_attr or "", "")}.get(attr)  # fmt: skip
            if not key:
                raise exceptions.BadRequestError(f"cannot change {attr!r}", scim_type="noTarget")
            if key == "active" and isinstance(value, str):  # Azure sends "False"
                value = value.lower() == "true"
            self.changes[key] = value

    handle_add = _set
    handle_replace = _set


class ScimGroupAdapter(_OrgScimAdapter):
    url_name = "scim:groups"
    resource_type = "Group"
    endpoint = "/scim/v2/Groups"
    description = "A group: its name maps to a role in the org"
    schema = constants.SchemaURI.GROUP
    ATTR_MAP = ScimGroupFilterQuery.attr_map

    obj: ScimGroup

    def __init__(self, obj: ScimGroup, request: HttpRequest | None = None) -> None:
        super().__init__(obj, request)
        self.changes: dict[str, Any] = {"add": [], "remove": []}

    @property
    def display_name(self) -> str:
        return self.obj.display_name

    def to_dict(self) -> dict[str, Any]:
        members = ScimGroupMember.objects.filter(group=self.obj).select_related("user")
        return {
            "schemas": [constants.SchemaURI.GROUP],
            "id": self.id,
            "externalId": self.obj.external_id,
            "displayName": self.obj.display_name,
            "members": [{"value": str(member.user.scim_id), "display": member.user.user_name}
                        for member in members],
            "meta": self.meta,
        }  # fmt: skip

    def from_dict(self, d: dict[str, Any]) -> None:
        if d.get("displayName") is not None:
            self.changes["display_name"] = d["displayName"]
        if d.get("externalId") is not None:
            self.changes["external_id"] = d["externalId"]
        if "members" in d:
            self.changes["replace"] = _member_ids(d["members"])

    def save(self) -> None:
        request = self.request
        with _scim_errors(), transaction.atomic():
            group, affected = scim_group_save(
                org=request.scim_token.org, group=None if self.obj._state.adding else self.obj,
                display_name=self.changes.get("display_name"),
                external_id=self.changes.get("external_id"), add=self.changes["add"],
                remove=self.changes["remove"], replace=self.changes.get("replace"),
            )  # fmt: skip
            self.obj = group
            _apply(request, list(ScimUser.objects.filter(pk__in=affected)))
        self.changes = {"add": [], "remove": []}

    def delete(self) -> None:
        with _scim_errors(), transaction.atomic():
            affected = scim_group_delete(group=self.obj)
            _apply(self.request, list(ScimUser.objects.filter(pk__in=affected)))

    def parse_path_and_values(self, path: str | None, value: Any) -> list[Any]:
        # 'members[value eq "<id>"]' (how Azure and Okta remove one member): kept as text.
        if path and path.startswith("members["):
            return [(path, value)]
        return super().parse_path_and_values(path, value)

    def _default_validate_op(self, path: Any, value: Any, operation: dict[str, Any]) -> None:
        if not isinstance(path, str):  # a member's filter path is checked by handle_remove
            super()._default_validate_op(path, value, operation)

    def _target(self, path: Any) -> str:
        if isinstance(path, str):
            return "members"
        return str(path.first_path[0]) if path is not None else ""

    def handle_add(self, path: Any, value: Any, operation: dict[str, Any]) -> None:
        target = self._target(path)
        if target == "members":
            self.changes["add"] += _member_ids(value)
        elif target in ("displayName", "externalId"):
            self.from_dict({target: value})
        else:
            raise exceptions.BadRequestError(f"cannot change {target!r}", scim_type="noTarget")

    def handle_replace(self, path: Any, value: Any, operation: dict[str, Any]) -> None:
        if path is not None and self._target(path) == "members":
            self.changes["replace"] = _member_ids(value)
        else:
            self.handle_add(path, value, operation)

    def handle_remove(self, path: Any, value: Any, operation: dict[str, Any]) -> None:
        if isinstance(path, str):  # members[value eq "<id>"]
            wanted = path.split('"')
            self.changes["remove"] += [wanted[1]] if len(wanted) > 2 else []
        elif self._target(path) == "members":
            if value is None:
                self.changes["replace"] = []
            else:
                self.changes["remove"] += _member_ids(value)
        else:
            raise exceptions.BadRequestError("only members can be removed", scim_type="noTarget")


def _member_ids(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    ids = [item.get("value") for item in items if isinstance(item, dict)]
    if any(not isinstance(member, str) for member in ids) or len(ids) != len(items):
        raise exceptions.BadRequestError(
            "members are objects with a value", scim_type="invalidValue"
        )
    return [str(member) for member in ids]


def scim_user_model() -> type[ScimUser]:
    return ScimUser
